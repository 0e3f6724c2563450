package duration

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		err  bool
	}{
		{"7d", 7 * 24 * time.Hour, false},
		{"0d", 0, false},
		{"48h", 48 * time.Hour, false},
		{"90m", 90 * time.Minute, false},
		{"1h30m", 90 * time.Minute, false},
		{"500ms", 500 * time.Millisecond, false},
		{"0", 0, false},
		{"-1h", -time.Hour, false},
		{"", 0, true},
		{"d", 0, true},
		{"1.5d", 0, true},
		{"7days", 0, true},
		{"soon", 0, true},
		{"99999999999d", 0, true},
	} {
		got, err := Parse(tc.in)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("Parse(%q) = %v, %v; want %v, error %t", tc.in, got, err, tc.want, tc.err)
		}
		if err != nil && !strings.Contains(err.Error(), `"7d"`) {
			t.Errorf("Parse(%q) error %q does not show the syntax", tc.in, err)
		}
	}
}

func TestRoundTrip(t *testing.T) {
	for _, d := range []time.Duration{0, 7 * 24 * time.Hour, 48 * time.Hour, 25 * time.Hour, 90 * time.Minute, time.Millisecond, -24 * time.Hour} {
		b, err := json.Marshal(Duration(d))
		if err != nil {
			t.Fatal(err)
		}
		var back Duration
		if err := json.Unmarshal(b, &back); err != nil || back.D() != d {
			t.Errorf("%v: wrote %s, read back %v, %v", d, b, back.D(), err)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"7d", "48h", "90m", "1h30m", "-3d", "0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := Parse(s)
		if err != nil {
			return
		}
		back, err := Parse(Duration(d).String())
		if err != nil || back != d {
			t.Fatalf("%q parsed as %v, written as %q, read back as %v, %v", s, d, Duration(d).String(), back, err)
		}
	})
}
