package pkcs11

import (
	"bytes"
	"context"
	"crypto"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/armor-apt/armor/debian/sign"
	"github.com/armor-apt/armor/internal/testkit/hsmtest"
)

const release = "Origin: test\nSuite: stable\nDate: Sun, 22 Nov 2026 07:00:00 UTC\n"

// TestSoftHSM: a key generated on a real token (SoftHSM2, by pkcs11-tool) certifies
// itself and signs Release files that verify; the PIN comes from pin-value, pin-source or
// the caller; a wrong PIN is refused with ErrSignerDenied and names the key, not the PIN.
func TestSoftHSM(t *testing.T) {
	tok := hsmtest.New(t, "armor", "1234")
	tok.GenerateRSA(t, 3072, "archive", "01")
	ctx := context.Background()
	uri := tok.URI("archive")
	pinFile := filepath.Join(t.TempDir(), "pin")
	os.WriteFile(pinFile, []byte("1234\n"), 0o600)

	var cert []byte
	for _, tc := range []struct {
		name, uri string
		pin       []byte
	}{
		{"pin from the caller", uri, []byte("1234")},
		{"pin-value", uri + "&pin-value=1234", nil},
		{"pin-source", uri + "&pin-source=file://" + pinFile, []byte("wrong, unused")},
		{"by id", "pkcs11:token=armor;id=%01?module-path=" + hsmtest.Module, []byte("1234")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Open(ctx, tc.uri, tc.pin)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			var k *sign.Key
			if cert == nil {
				k, err = sign.Certify(ctx, s, tc.uri, "Test <t@example.org>", time.Now())
				var b bytes.Buffer
				if err == nil {
					err = k.WritePublicKeyring(&b)
				}
				cert = b.Bytes()
			} else {
				k, err = sign.NewKey(s, tc.uri, cert)
			}
			if err != nil {
				t.Fatal(err)
			}
			_, det, err := k.SignRelease(ctx, []byte(release), crypto.SHA512, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := sign.VerifyDetached([]byte(release), det, cert); err != nil {
				t.Fatal(err)
			}
		})
	}

	_, err := Open(ctx, uri+"&pin-value=9999", nil)
	if !errors.Is(err, sign.ErrSignerDenied) || strings.Contains(err.Error(), "9999") || !strings.Contains(err.Error(), "object=archive") {
		t.Errorf("wrong PIN: got %v, want ErrSignerDenied naming the key and not the PIN", err)
	}
	if _, err := Open(ctx, uri, nil); err == nil || !strings.Contains(err.Error(), "no PIN") {
		t.Errorf("no PIN: got %v", err)
	}
	if _, err := Open(ctx, tok.URI("missing"), []byte("1234")); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("missing key: got %v", err)
	}
}

func TestParseURI(t *testing.T) {
	for _, tc := range []struct{ uri, err string }{
		{"pkcs11:token=a;object=b?module-path=/m.so", ""},
		{"pkcs11:serial=0123;id=%01%02?module-path=/m.so&pin-value=1", ""},
		{"pkcs11:slot-id=3;object=b?module-path=/m.so", ""},
		{"pkcs11:token=a;object=b", "no module-path"},
		{"pkcs11:object=b?module-path=/m.so", "selects no token"},
		{"pkcs11:token=a?module-path=/m.so", "selects no key"},
		{"pkcs11:token=a;objet=b?module-path=/m.so", `unknown attribute "objet"`},
		{"pkcs11:token=a;token=b;object=c?module-path=/m.so", "twice"},
		{"pkcs11:token=a;object=b?module-path=/m.so&pin-value=1&pin-source=/p", "not both"},
		{"pkcs11:token=a;object=b;type=public?module-path=/m.so", "type=private"},
		{"pkcs11:slot-id=x;object=b?module-path=/m.so", "not a number"},
		{"pkcs11:token=%zz;object=b?module-path=/m.so", "invalid URL escape"},
	} {
		_, err := ParseURI(tc.uri)
		if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%s: got %v, want %q", tc.uri, err, tc.err)
		}
	}
	u, err := ParseURI("pkcs11:token=My%20Token;id=%01%ff?module-path=/m.so&pin-value=12%3B4")
	if err != nil || u.Token != "My Token" || !bytes.Equal(u.ID, []byte{1, 0xff}) || u.PIN != "12;4" {
		t.Errorf("decoded %+v, %v", u, err)
	}
	if r := Redact("pkcs11:token=a;object=b?pin-value=secret&module-path=/m.so"); strings.Contains(r, "secret") {
		t.Errorf("Redact left the PIN: %s", r)
	}
}

func FuzzParseURI(f *testing.F) {
	f.Add("pkcs11:token=a;object=b?module-path=/m.so&pin-value=1")
	f.Add("pkcs11:serial=0123;id=%01%02?module-path=/m.so")
	f.Fuzz(func(t *testing.T, s string) {
		u, err := ParseURI(s)
		if err == nil && (u.ModulePath == "" || u.Object == "" && u.ID == nil) {
			t.Fatalf("accepted %q without a module or a key", s)
		}
		if err != nil && strings.Contains(s, "pin-value=") && len(s) > 20 {
			if v := s[strings.Index(s, "pin-value=")+10:]; len(v) >= 6 && !strings.ContainsAny(v, "&%") && strings.Contains(err.Error(), v) {
				t.Fatalf("error shows the PIN: %v", err)
			}
		}
	})
}
