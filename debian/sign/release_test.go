package sign

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

	"github.com/ProtonMail/go-crypto/openpgp/packet"
)

// One signature serves as both InRelease and Release.gpg: every verifier accepts both.
func TestSignReleaseOneSignature(t *testing.T) {
	release := []byte("Origin: test\nLabel: test\nSuite: stable\nDate: Sat, 21 Nov 2026 10:00:00 UTC\nSHA256:\n " +
		"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855                0 main/binary-amd64/Packages\n")
	for _, name := range []string{"rsa", "eddsa"} {
		for _, h := range []crypto.Hash{crypto.SHA256, crypto.SHA512} {
			t.Run(name+"/"+h.String(), func(t *testing.T) {
				f, err := os.Open(filepath.Join("..", "..", "testdata", "keys", name+".sec.asc"))
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				k, err := ReadSecretKey(f, nil)
				if err != nil {
					t.Fatal(err)
				}
				in, det, err := k.SignRelease(context.Background(), release, h, time.Now())
				if err != nil {
					t.Fatal(err)
				}
				pub := filepath.Join("..", "..", "testdata", "keys", name+".pub.gpg")
				keyring, _ := os.ReadFile(pub)
				if plain, _, err := VerifyClearsigned(in, keyring); err != nil || string(plain) != string(release) {
					t.Fatalf("InRelease: %v", err)
				}
				if _, err := VerifyDetached(release, det, keyring); err != nil {
					t.Fatalf("Release.gpg: %v", err)
				}
				dir := t.TempDir()
				rel, inr, gpg := filepath.Join(dir, "Release"), filepath.Join(dir, "InRelease"), filepath.Join(dir, "Release.gpg")
				os.WriteFile(rel, release, 0o644)
				os.WriteFile(inr, in, 0o644)
				os.WriteFile(gpg, det, 0o644)
				for _, args := range [][]string{
					{"gpgv", "--keyring", pub, inr},
					{"gpgv", "--keyring", pub, gpg, rel},
					{"sqv", "--keyring", pub, gpg, rel},
				} {
					if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
						t.Errorf("%v: %v\n%s", args, err, out)
					}
				}
				os.WriteFile(rel, append(release, 'x'), 0o644)
				for _, args := range [][]string{{"gpgv", "--keyring", pub, gpg, rel}, {"sqv", "--keyring", pub, gpg, rel}} {
					if exec.Command(args[0], args[1:]...).Run() == nil {
						t.Errorf("%v accepted a tampered Release", args)
					}
				}
			})
		}
	}
}

// TestSignReleaseTwoKeys: during a key change InRelease and Release.gpg carry a signature
// by the old key and one by the new; gpgv, sqv and VerifyClearsigned accept them with
// either key's keyring alone, and refuse them with a third key's.
func TestSignReleaseTwoKeys(t *testing.T) {
	old, nu := fixtureKey(t, "rsa"), fixtureKey(t, "eddsa")
	in, det, err := SignRelease(context.Background(), []*Key{old, nu}, []byte(sampleRelease), crypto.SHA512, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	rel, inr, gpg := writeFile(t, dir, "Release", []byte(sampleRelease)), writeFile(t, dir, "InRelease", in), writeFile(t, dir, "Release.gpg", det)
	for _, k := range []*Key{old, nu} {
		keyring := publicKeyring(t, k)
		pub := writeFile(t, dir, k.Fingerprint()+".gpg", keyring)
		if plain, _, err := VerifyClearsigned(in, keyring); err != nil || string(plain) != sampleRelease {
			t.Errorf("InRelease with %s's keyring alone: %v", k.Fingerprint(), err)
		}
		if _, err := VerifyDetached([]byte(sampleRelease), det, keyring); err != nil {
			t.Errorf("Release.gpg with %s's keyring alone: %v", k.Fingerprint(), err)
		}
		// gpgv exits non-zero when it cannot check one of the signatures (the key it
		// lacks); apt, like this, reads its status lines and accepts a good signature by
		// a key it trusts whatever else is there. sqv needs one good signature.
		for _, args := range [][]string{
			{"gpgv", "--status-fd", "1", "--keyring", pub, inr},
			{"gpgv", "--status-fd", "1", "--keyring", pub, gpg, rel},
		} {
			out, _ := exec.Command(args[0], args[1:]...).Output()
			if !strings.Contains(string(out), "[GNUPG:] VALIDSIG "+k.Fingerprint()) {
				t.Errorf("%v: no VALIDSIG by %s:\n%s", args, k.Fingerprint(), out)
			}
		}
		if out, err := exec.Command("sqv", "--keyring", pub, gpg, rel).CombinedOutput(); err != nil {
			t.Errorf("sqv with %s's keyring: %v\n%s", k.Fingerprint(), err, out)
		}
	}
	other := writeFile(t, dir, "other.gpg", publicKeyring(t, fixtureKey(t, "protected")))
	if out, _ := exec.Command("gpgv", "--status-fd", "1", "--keyring", other, inr).Output(); strings.Contains(string(out), "VALIDSIG") {
		t.Error("gpgv found a valid signature with a third key's keyring")
	}
	if exec.Command("sqv", "--keyring", other, gpg, rel).Run() == nil {
		t.Error("sqv accepted the two signatures with a third key's keyring")
	}
}

// TestSignReleaseDeterministic: the same key, Release, hash and signing time give
// byte-identical InRelease and Release.gpg (no random salt notation), with the signature
// made at the given time, which gpgv and sqv accept; another time gives other bytes.
func TestSignReleaseDeterministic(t *testing.T) {
	at := time.Date(2026, 11, 22, 7, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		key  string
		keys []string
	}{{"rsa", []string{"rsa"}}, {"eddsa", []string{"eddsa"}}, {"both", []string{"rsa", "eddsa"}}} {
		t.Run(tc.key, func(t *testing.T) {
			var keys []*Key
			for _, n := range tc.keys {
				keys = append(keys, fixtureKey(t, n))
			}
			sign := func(at time.Time) (in, det []byte) {
				t.Helper()
				in, det, err := SignRelease(context.Background(), keys, []byte(sampleRelease), crypto.SHA512, at)
				if err != nil {
					t.Fatal(err)
				}
				return in, det
			}
			in1, det1 := sign(at)
			// The same key read again, and a time within the same second.
			keys = nil
			for _, n := range tc.keys {
				keys = append(keys, fixtureKey(t, n))
			}
			in2, det2 := sign(at.Add(400 * time.Millisecond))
			if !bytes.Equal(in1, in2) || !bytes.Equal(det1, det2) {
				t.Fatalf("two signings of one Release differ:\n%s\n%s", in1, in2)
			}
			for _, s := range signaturePackets(t, det1) {
				if !s.CreationTime.Equal(at) {
					t.Errorf("signature made at %s, want %s", s.CreationTime.UTC(), at)
				}
				if len(s.Notations) > 0 {
					t.Errorf("signature carries %d notations (%s), want none", len(s.Notations), s.Notations[0].Name)
				}
			}
			if in3, _ := sign(at.Add(time.Second)); bytes.Equal(in1, in3) {
				t.Error("signatures made a second apart are identical")
			}
			dir := t.TempDir()
			rel, inr, gpg := writeFile(t, dir, "Release", []byte(sampleRelease)), writeFile(t, dir, "InRelease", in1), writeFile(t, dir, "Release.gpg", det1)
			for _, k := range keys {
				pub := writeFile(t, dir, k.Fingerprint()+".gpg", publicKeyring(t, k))
				for _, args := range [][]string{
					{"gpgv", "--status-fd", "1", "--keyring", pub, inr},
					{"gpgv", "--status-fd", "1", "--keyring", pub, gpg, rel},
				} {
					out, _ := exec.Command(tool(t, args[0]), args[1:]...).Output()
					if !strings.Contains(string(out), "[GNUPG:] VALIDSIG "+k.Fingerprint()) {
						t.Errorf("%v: no VALIDSIG by %s:\n%s", args, k.Fingerprint(), out)
					}
				}
				if out, err := exec.Command(tool(t, "sqv"), "--keyring", pub, gpg, rel).CombinedOutput(); err != nil {
					t.Errorf("sqv: %v\n%s", err, out)
				}
			}
		})
	}
}

// TestSignReleaseBeforeKeyCreation: a signing time before the key existed signs at the
// key's creation (gpgv refuses a signature older than its key), and gpgv accepts it.
func TestSignReleaseBeforeKeyCreation(t *testing.T) {
	k := fixtureKey(t, "rsa")
	created := k.Info().Created
	in, det, err := k.SignRelease(context.Background(), []byte(sampleRelease), crypto.SHA256, created.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if s := signaturePackets(t, det)[0]; !s.CreationTime.Equal(created) {
		t.Errorf("signature made at %s, want the key's creation %s", s.CreationTime.UTC(), created.UTC())
	}
	dir := t.TempDir()
	pub := writeFile(t, dir, "key.gpg", publicKeyring(t, k))
	if out, err := exec.Command(tool(t, "gpgv"), "--keyring", pub, writeFile(t, dir, "InRelease", in)).CombinedOutput(); err != nil {
		t.Errorf("gpgv: %v\n%s", err, out)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := k.SignRelease(ctx, []byte(sampleRelease), crypto.SHA256, time.Now()); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled context: got %v", err)
	}
}

// signaturePackets returns the signature packets of an armored signature block.
func signaturePackets(t *testing.T, armored []byte) []*packet.Signature {
	t.Helper()
	b := armoredBlock(t, armored)
	var out []*packet.Signature
	r := packet.NewReader(b)
	for {
		p, err := r.Next()
		if err != nil {
			break
		}
		if s, ok := p.(*packet.Signature); ok {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		t.Fatal("no signature packet")
	}
	return out
}
