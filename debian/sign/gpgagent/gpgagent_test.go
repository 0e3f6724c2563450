package gpgagent

import (
	"bytes"
	"context"
	"crypto"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/armor-apt/armor/debian/sign"
)

const keys = "../../../testdata/keys"

// Home makes a throwaway GNUPGHOME with the fixture keys imported, and stops its agent
// when the test ends.
func home(t *testing.T, names ...string) string {
	t.Helper()
	for _, tool := range []string{"gpg", "gpg-agent", "gpgconf"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed: run .ci/install-deps (apt-get install gnupg)", tool)
		}
	}
	h, err := os.MkdirTemp("", "agent")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(h) })
	os.Chmod(h, 0o700)
	os.WriteFile(filepath.Join(h, "gpg-agent.conf"), []byte("allow-preset-passphrase\n"), 0o600)
	t.Setenv("GNUPGHOME", h)
	t.Cleanup(func() { exec.Command("gpgconf", "--kill", "gpg-agent").Run() })
	for _, n := range names {
		if out, err := exec.Command("gpg", "--batch", "--import", filepath.Join(keys, n+".sec.asc")).CombinedOutput(); err != nil {
			t.Fatalf("gpg --import %s: %v\n%s", n, err, out)
		}
	}
	return h
}

func fixture(t *testing.T, name string) *sign.Key {
	t.Helper()
	f, err := os.Open(filepath.Join(keys, name+".sec.asc"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var pass []byte
	if name == "protected" {
		pass = []byte("armor-test-passphrase")
	}
	k, err := sign.ReadSecretKey(f, pass)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

const release = "Origin: test\nSuite: stable\nDate: Sun, 22 Nov 2026 07:00:00 UTC\n"

// TestAgentSignsAsTheKeyFile: a real gpg-agent holding the fixture keys (RSA and EdDSA)
// signs byte for byte what the key files sign, and the certificate gpg exports is the
// published one.
func TestAgentSignsAsTheKeyFile(t *testing.T) {
	home(t, "rsa", "eddsa")
	at := time.Date(2026, 11, 22, 7, 0, 0, 0, time.UTC)
	ctx := context.Background()
	for _, name := range []string{"rsa", "eddsa"} {
		t.Run(name, func(t *testing.T) {
			file := fixture(t, name)
			s, err := Open(ctx, "gpg-agent:"+strings.ToLower(file.Fingerprint()))
			if err != nil {
				t.Fatal(err)
			}
			k, err := sign.NewKey(s, "gpg-agent:"+file.Fingerprint(), s.Certificate())
			if err != nil {
				t.Fatal(err)
			}
			if k.Fingerprint() != file.Fingerprint() {
				t.Fatalf("fingerprint %s, want %s", k.Fingerprint(), file.Fingerprint())
			}
			got, _, err := k.SignRelease(ctx, []byte(release), crypto.SHA512, at)
			if err != nil {
				t.Fatal(err)
			}
			want, _, err := file.SignRelease(ctx, []byte(release), crypto.SHA512, at)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("gpg-agent signed otherwise than the key file:\n%s\n%s", got, want)
			}
		})
	}
}

// TestAgentProtectedKey: a passphrase-protected key signs once the agent has its
// passphrase (preset, as a CI job does), and is refused with ErrSignerDenied while it
// has none and no pinentry can ask.
func TestAgentProtectedKey(t *testing.T) {
	h := home(t, "protected")
	file := fixture(t, "protected")
	os.WriteFile(filepath.Join(h, "gpg-agent.conf"), []byte("allow-preset-passphrase\npinentry-program /bin/false\n"), 0o600)
	exec.Command("gpgconf", "--kill", "gpg-agent").Run()
	ctx := context.Background()
	s, err := Open(ctx, "gpg-agent:"+file.Fingerprint())
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Sign(ctx, crypto.SHA256.New().Sum(nil), crypto.SHA256)
	if !errors.Is(err, sign.ErrSignerDenied) {
		t.Fatalf("no passphrase: got %v, want ErrSignerDenied", err)
	}
	preset := "/usr/lib/gnupg/gpg-preset-passphrase"
	if out, err := exec.Command(preset, "--preset", "-P", "armor-test-passphrase", s.grip).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", preset, err, out)
	}
	k, err := sign.NewKey(s, "gpg-agent:"+file.Fingerprint(), s.Certificate())
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := k.SignRelease(ctx, []byte(release), crypto.SHA256, time.Now()); err != nil {
		t.Fatal(err)
	}
}

// TestAgentErrors: an unknown key, a malformed URI and an agent that is gone.
func TestAgentErrors(t *testing.T) {
	home(t, "rsa")
	ctx := context.Background()
	if _, err := Open(ctx, "gpg-agent:0123"); err == nil || !strings.Contains(err.Error(), "40 hex digits") {
		t.Errorf("short fingerprint: %v", err)
	}
	if _, err := Open(ctx, "gpg-agent:"+strings.Repeat("AB", 20)); err == nil || !strings.Contains(err.Error(), "no secret key") {
		t.Errorf("unknown key: %v", err)
	}
	s, err := Open(ctx, "gpg-agent:"+fixture(t, "rsa").Fingerprint())
	if err != nil {
		t.Fatal(err)
	}
	s.socket = filepath.Join(t.TempDir(), "S.nothing")
	if _, err := s.Sign(ctx, crypto.SHA256.New().Sum(nil), crypto.SHA256); !errors.Is(err, sign.ErrSignerUnavailable) {
		t.Errorf("agent gone: got %v, want ErrSignerUnavailable", err)
	}
}

func FuzzParseSexp(f *testing.F) {
	f.Add([]byte("(7:sig-val(3:rsa(1:s3:abc)))"))
	f.Add([]byte("(7:sig-val(5:eddsa(1:r2:ab)(1:s2:cd)))"))
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := parseSexp(b)
		if err == nil {
			v.value("s")
		}
	})
}

func FuzzUnescape(f *testing.F) {
	f.Add("(7:sig-val%0A%25)")
	f.Fuzz(func(t *testing.T, s string) {
		b, err := unescape(s)
		if err == nil && !strings.Contains(s, "%") && string(b) != s {
			t.Fatalf("%q unescaped to %q", s, b)
		}
	})
}
