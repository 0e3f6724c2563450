package sign

import (
	"bytes"
	"context"
	"crypto"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
)

// heldElsewhere is a Signer as a backend is one: it only hands out raw signatures, here
// those of a fixture key, and can be told to fail.
type heldElsewhere struct {
	inner Signer
	err   error
}

func (h *heldElsewhere) Public() crypto.PublicKey { return h.inner.Public() }
func (h *heldElsewhere) Sign(ctx context.Context, d []byte, hh crypto.Hash) ([]byte, error) {
	if h.err != nil {
		return nil, h.err
	}
	return h.inner.Sign(ctx, d, hh)
}

// TestNewKeyFromPublishedKey: a Signer matched with the published public key signs
// exactly as the key file does (same fingerprint, byte-identical signatures).
func TestNewKeyFromPublishedKey(t *testing.T) {
	for _, name := range []string{"rsa", "eddsa"} {
		t.Run(name, func(t *testing.T) {
			file := fixtureKey(t, name)
			remote, err := NewKey(&heldElsewhere{inner: file.Signer()}, "test:"+name, readFixture(t, name+".pub.gpg"))
			if err != nil {
				t.Fatal(err)
			}
			if remote.Fingerprint() != file.Fingerprint() {
				t.Fatalf("fingerprint %s, want %s", remote.Fingerprint(), file.Fingerprint())
			}
			at := time.Date(2026, 11, 22, 7, 0, 0, 0, time.UTC)
			a, _, err := file.SignRelease(context.Background(), []byte(sampleRelease), crypto.SHA512, at)
			if err != nil {
				t.Fatal(err)
			}
			b, _, err := remote.SignRelease(context.Background(), []byte(sampleRelease), crypto.SHA512, at)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(a, b) {
				t.Errorf("the key file and the same key through a Signer sign differently")
			}
			var buf bytes.Buffer
			if err := remote.WriteSecret(&buf, nil); err == nil {
				t.Error("WriteSecret of a key held elsewhere succeeded")
			}
		})
	}
}

// TestNewKeyMismatch: a Signer whose key is not the published one is refused, naming
// both fingerprints.
func TestNewKeyMismatch(t *testing.T) {
	rsa, eddsa := fixtureKey(t, "rsa"), fixtureKey(t, "eddsa")
	_, err := NewKey(rsa.Signer(), "test:rsa", readFixture(t, "eddsa.pub.gpg"))
	if !errors.Is(err, ErrKeyMismatch) {
		t.Fatalf("got %v, want ErrKeyMismatch", err)
	}
	own, err2 := publicKeyPacket(rsa.Signer().Public(), eddsa.Info().Created)
	if err2 != nil {
		t.Fatal(err2)
	}
	for _, want := range []string{eddsa.Fingerprint(), fmt.Sprintf("%X", own.Fingerprint), "test:rsa"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
}

// TestSignerErrors: a backend's error reaches the caller wrapped, naming the key; a
// backend that signs with another key than it names is caught before anything is written.
func TestSignerErrors(t *testing.T) {
	rsa := fixtureKey(t, "rsa")
	down := fmt.Errorf("dial 127.0.0.1:1: connection refused: %w", ErrSignerUnavailable)
	k, err := NewKey(&heldElsewhere{inner: rsa.Signer(), err: down}, "test:down", readFixture(t, "rsa.pub.gpg"))
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = k.SignRelease(context.Background(), []byte(sampleRelease), crypto.SHA256, time.Now())
	if !errors.Is(err, ErrSignerUnavailable) || !strings.Contains(err.Error(), "test:down") {
		t.Errorf("got %v, want ErrSignerUnavailable naming test:down", err)
	}
	// A signer that says it holds the RSA fixture key but signs with another RSA key.
	other, err := Generate("other", "", RSA3072, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	liar := &lyingSigner{pub: rsa.Signer(), sign: other.Signer()}
	k, err = NewKey(liar, "test:liar", readFixture(t, "rsa.pub.gpg"))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := k.SignRelease(context.Background(), []byte(sampleRelease), crypto.SHA256, time.Now()); err == nil || !strings.Contains(err.Error(), "does not verify") {
		t.Errorf("a signature by another key: got %v, want a verification error", err)
	}
}

type lyingSigner struct{ pub, sign Signer }

func (l *lyingSigner) Public() crypto.PublicKey { return l.pub.Public() }
func (l *lyingSigner) Sign(ctx context.Context, d []byte, h crypto.Hash) ([]byte, error) {
	return l.sign.Sign(ctx, d, h)
}

// TestCertify: a certificate made for a key held elsewhere is one gpg imports, with the
// creation time and user ID given, and gpgv and sqv accept what the key then signs; the
// same key and time give the same fingerprint.
func TestCertify(t *testing.T) {
	for _, name := range []string{"rsa", "eddsa"} {
		t.Run(name, func(t *testing.T) {
			s := fixtureKey(t, name).Signer()
			created := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
			k, err := Certify(context.Background(), s, "test:"+name, "Example Archive <archive@example.org>", created)
			if err != nil {
				t.Fatal(err)
			}
			again, err := Certify(context.Background(), s, "test:"+name, "Example Archive <archive@example.org>", created.Add(300*time.Millisecond))
			if err != nil || again.Fingerprint() != k.Fingerprint() {
				t.Fatalf("certifying again: %v, fingerprint %s vs %s", err, again.Fingerprint(), k.Fingerprint())
			}
			if i := k.Info(); !i.Created.Equal(created) || i.UserID != "Example Archive <archive@example.org>" {
				t.Errorf("info %+v", i)
			}
			home, dir := gnupgHome(t), t.TempDir()
			pub := writeFile(t, dir, "pub.gpg", publicKeyring(t, k))
			if out, err := run(t, home, nil, "gpg", "--batch", "--import", pub); err != nil {
				t.Fatalf("gpg --import: %v %s", err, out)
			}
			out, err := run(t, home, nil, "gpg", "--batch", "--with-colons", "--list-keys")
			if err != nil || !strings.Contains(string(out), k.Fingerprint()) || !strings.Contains(string(out), "archive@example.org") {
				t.Fatalf("gpg --list-keys: %v\n%s", err, out)
			}
			in, det, err := k.SignRelease(context.Background(), []byte(sampleRelease), crypto.SHA512, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			rel, inr, gpg := writeFile(t, dir, "Release", []byte(sampleRelease)), writeFile(t, dir, "InRelease", in), writeFile(t, dir, "Release.gpg", det)
			for _, args := range [][]string{{"gpgv", "--keyring", pub, inr}, {"gpgv", "--keyring", pub, gpg, rel}, {"sqv", "--keyring", pub, gpg, rel}} {
				if out, err := exec.Command(tool(t, args[0]), args[1:]...).CombinedOutput(); err != nil {
					t.Errorf("%v: %v\n%s", args, err, out)
				}
			}
			// A certificate whose self-signature another key made is refused.
			liar := &lyingSigner{pub: s, sign: fixtureKey(t, map[string]string{"rsa": "protected", "eddsa": "rsa"}[name]).Signer()}
			if _, err := Certify(context.Background(), liar, "test:liar", "x", created); err == nil {
				t.Error("a certificate self-signed by another key was made")
			}
		})
	}
}

// TestECDSAKeyFile: an ECDSA key file (as gpg can export one) still signs Release files
// that gpgv and sqv accept.
func TestECDSAKeyFile(t *testing.T) {
	e, err := openpgp.NewEntity("ecdsa", "", "ecdsa@armor.invalid", &packet.Config{
		Algorithm: packet.PubKeyAlgoECDSA, Curve: packet.CurveNistP256, DefaultHash: crypto.SHA256,
	})
	if err != nil {
		t.Fatal(err)
	}
	e.Subkeys = nil
	k, err := newKey(e)
	if err != nil {
		t.Fatal(err)
	}
	in, det, err := k.SignRelease(context.Background(), []byte(sampleRelease), crypto.SHA256, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	pub := writeFile(t, dir, "pub.gpg", publicKeyring(t, k))
	rel, inr, gpg := writeFile(t, dir, "Release", []byte(sampleRelease)), writeFile(t, dir, "InRelease", in), writeFile(t, dir, "Release.gpg", det)
	for _, args := range [][]string{{"gpgv", "--keyring", pub, inr}, {"gpgv", "--keyring", pub, gpg, rel}, {"sqv", "--keyring", pub, gpg, rel}} {
		if out, err := exec.Command(tool(t, args[0]), args[1:]...).CombinedOutput(); err != nil {
			t.Errorf("%v: %v\n%s", args, err, out)
		}
	}
}
