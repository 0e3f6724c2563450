package hostname

import (
	"errors"
	"testing"
)

func TestNormalize(t *testing.T) {
	tests := []struct {
		name, in, want string
		bad            bool
	}{
		{"lowercase", "APT.Example.TEST", "apt.example.test", false},
		{"port", "apt.example.test:8080", "apt.example.test", false},
		{"trailing dot", "apt.example.test.", "apt.example.test", false},
		{"idna", "bücher.example", "xn--bcher-kva.example", false},
		{"ipv4", "127.0.0.1:80", "127.0.0.1", false},
		{"ipv6", "[::1]:8080", "::1", false},
		{"empty", "", "", true},
		{"space inside", "a b.example", "", true},
		{"slash", "a/b.example", "", true},
		{"bad port", "a.example:8x", "", true},
		{"unclosed bracket", "[::1", "", true},
		{"underscore", "a_b.example", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Normalize(tt.in)
			if tt.bad {
				if !errors.Is(err, ErrInvalid) {
					t.Fatalf("Normalize(%q) = %q, %v; want ErrInvalid", tt.in, got, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("Normalize(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
			}
		})
	}
}

func FuzzNormalize(f *testing.F) {
	for _, s := range []string{"apt.example.test", "A.B:1", "[::1]:2", "bücher.de.", "..", ":"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := Normalize(s)
		if err != nil {
			return
		}
		again, err := Normalize(got)
		if err != nil || again != got {
			t.Fatalf("not idempotent: %q -> %q -> %q, %v", s, got, again, err)
		}
	})
}
