package tomlfile

import (
	"strings"
	"testing"
)

func TestDecode(t *testing.T) {
	type doc struct {
		Name string `toml:"name"`
		Size int    `toml:"size"`
	}
	tests := []struct {
		name, in string
		want     []string // substrings of the error; nil: no error
	}{
		{"ok", "name = 'a'\nsize = 3\n", nil},
		{"unknown key", "name = 'a'\ncolour = 'red'\n", []string{"f.toml", "unknown key", "colour"}},
		{"wrong type", "name = 'a'\nsize = 'big'\n", []string{"f.toml:2:"}},
		{"malformed", "name = \n", []string{"f.toml:1:"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var d doc
			err := Decode([]byte(tt.in), "f.toml", &d)
			if tt.want == nil {
				if err != nil || d.Name != "a" || d.Size != 3 {
					t.Fatalf("got %+v, %v", d, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error for %q", tt.in)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}
