package api

import (
	"errors"
	"strings"
	"testing"
)

// TestSignHook: the scheme is GitHub's X-Hub-Signature-256, checked against the example
// in GitHub's documentation ("Validating webhook deliveries").
func TestSignHook(t *testing.T) {
	const secret, body = "It's a Secret to Everybody", "Hello, World!"
	const want = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
	if got := SignHook(secret, []byte(body)); got != want {
		t.Fatalf("SignHook = %s; want %s", got, want)
	}
	tests := []struct {
		name, secret, body, header string
		err                        error
	}{
		{"good", secret, body, want, nil},
		{"surrounding space", secret, body, " " + want + " ", nil},
		{"wrong secret", "another", body, want, ErrHookBadSignature},
		{"changed body", secret, body + " ", want, ErrHookBadSignature},
		{"no header", secret, body, "", ErrHookUnsigned},
		{"sha1", secret, body, "sha1=" + strings.TrimPrefix(want, "sha256="), ErrHookUnsigned},
		{"not hex", secret, body, "sha256=zz", ErrHookUnsigned},
		{"short", secret, body, want[:len(want)-2], ErrHookUnsigned},
		{"upper hex", secret, body, "sha256=" + strings.ToUpper(strings.TrimPrefix(want, "sha256=")), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := VerifyHook(tt.secret, []byte(tt.body), tt.header); !errors.Is(err, tt.err) {
				t.Fatalf("VerifyHook = %v; want %v", err, tt.err)
			}
		})
	}
}

// FuzzVerifyHook: any header either verifies (only the right signature) or is refused
// with one of the two errors; nothing panics.
func FuzzVerifyHook(f *testing.F) {
	f.Add("s", []byte("{}"), SignHook("s", []byte("{}")))
	f.Add("s", []byte("{}"), "sha256=")
	f.Add("", []byte(""), "sha256=00")
	f.Fuzz(func(t *testing.T, secret string, body []byte, header string) {
		err := VerifyHook(secret, body, header)
		switch {
		case err == nil:
			if strings.ToLower(strings.TrimSpace(header)) != SignHook(secret, body) {
				t.Fatalf("header %q verified, but the signature is %s", header, SignHook(secret, body))
			}
		case !errors.Is(err, ErrHookUnsigned) && !errors.Is(err, ErrHookBadSignature):
			t.Fatalf("unexpected error %v", err)
		}
	})
}
