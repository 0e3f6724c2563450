package sign

import (
	"crypto"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
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
				in, det, err := k.SignRelease(release, h)
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
