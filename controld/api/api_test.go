package api_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/armor-apt/armor/controld/api"
	"github.com/armor-apt/armor/internal/duration"
)

func TestNormalizeHostnames(t *testing.T) {
	tests := []struct {
		name string
		in   []string
		want string
		err  string
	}{
		{"normalised in order", []string{"B.test:80", "a.test."}, "b.test,a.test", ""},
		{"unicode", []string{"bücher.example"}, "xn--bcher-kva.example", ""},
		{"duplicate names both", []string{"A.test", "x.test", "a.test."}, "", `"A.test" and "a.test." are both a.test`},
		{"invalid", []string{"a_b.test"}, "", "a_b.test"},
		{"empty list", nil, "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := api.NormalizeHostnames(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || strings.Join(got, ",") != tc.want {
				t.Errorf("got %v, %v; want %s", got, err, tc.want)
			}
		})
	}
}

func TestDurationJSON(t *testing.T) {
	var v struct{ D duration.Duration }
	if err := json.Unmarshal([]byte(`{"D":"3d"}`), &v); err != nil || v.D.D() != 72*time.Hour {
		t.Fatalf("decode: %v, %v", v.D, err)
	}
	b, _ := json.Marshal(v)
	if string(b) != `{"D":"72h0m0s"}` {
		t.Errorf("encode = %s", b)
	}
	if err := json.Unmarshal([]byte(`{"D":"2 days"}`), &v); err == nil {
		t.Error("accepted \"2 days\"")
	}
}
