package sign

import (
	"bytes"
	"crypto"
	"strings"
	"testing"
)

// TestImportFromGpg makes keys with real gpg 2.2, exports them with
// `gpg --export-secret-keys --armor` (or --export-secret-subkeys), reads them with
// ReadSecretKey, signs, and checks the signatures with gpgv and VerifyClearsigned.
func TestImportFromGpg(t *testing.T) {
	for _, tc := range []struct {
		name       string
		algo       string // --quick-gen-key algorithm
		usage      string // --quick-gen-key usage
		addSubkey  string // if set, --quick-add-key FPR <addSubkey> sign
		export     string // --export-secret-keys or --export-secret-subkeys
		passphrase string
		wantAlgo   Algorithm
		bySubkey   bool // the signature must come from a subkey
	}{
		{"rsa with passphrase", "default", "default", "", "--export-secret-keys", "gpg pass phrase", RSA3072, false},
		{"rsa without passphrase", "rsa3072", "sign", "", "--export-secret-keys", "", RSA3072, false},
		{"ed25519 with passphrase", "future-default", "default", "", "--export-secret-keys", "gpg pass phrase", EdDSA, false},
		{"ed25519 without passphrase", "ed25519", "sign", "", "--export-secret-keys", "", EdDSA, false},
		{"certify-only primary, signing subkey", "ed25519", "cert", "ed25519", "--export-secret-keys", "pw", EdDSA, true},
		{"offline primary stub, signing subkey", "ed25519", "cert", "ed25519", "--export-secret-subkeys", "", EdDSA, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home := gpgHomeWithAgentCleanup(t)
			gpg := func(args ...string) []byte {
				t.Helper()
				base := []string{"--batch", "--no-tty", "--pinentry-mode", "loopback", "--passphrase", tc.passphrase}
				out, err := run(t, home, nil, "gpg", append(base, args...)...)
				if err != nil {
					t.Fatal(err)
				}
				return out
			}
			gpg("--quick-gen-key", "Gpg Made <gpg@armor.invalid>", tc.algo, tc.usage, "never")
			fpr := primaryFingerprint(t, gpg("--with-colons", "--list-keys"))
			if tc.addSubkey != "" {
				gpg("--quick-add-key", fpr, tc.addSubkey, "sign", "never")
			}
			secret := gpg("--armor", tc.export, fpr)
			public := gpg("--export", fpr)

			k, err := ReadSecretKey(bytes.NewReader(secret), []byte(tc.passphrase))
			if err != nil {
				t.Fatalf("ReadSecretKey of gpg's export: %v\n%s", err, secret)
			}
			if k.Fingerprint() != fpr {
				t.Errorf("fingerprint: got %s, gpg says %s", k.Fingerprint(), fpr)
			}
			if got := k.Info().Algorithm; got != tc.wantAlgo {
				t.Errorf("algorithm: got %s, want %s", got, tc.wantAlgo)
			}
			if got := k.pub.IsSubkey; got != tc.bySubkey {
				t.Errorf("signs with a subkey: got %v, want %v", got, tc.bySubkey)
			}

			dir := t.TempDir()
			keyring := writeFile(t, dir, "pub.gpg", public)
			inRelease, err := k.Clearsign([]byte(sampleRelease), crypto.SHA512)
			if err != nil {
				t.Fatal(err)
			}
			detached, err := k.DetachSign([]byte(sampleRelease), crypto.SHA256)
			if err != nil {
				t.Fatal(err)
			}
			out, err := run(t, home, nil, "gpgv", "--keyring", keyring, "--output", "-", writeFile(t, dir, "InRelease", inRelease))
			if err != nil {
				t.Errorf("gpgv rejected InRelease: %v", err)
			} else if !bytes.Equal(out, gpgvOutput([]byte(sampleRelease))) {
				t.Errorf("gpgv's signed text: got %q", out)
			}
			relPath := writeFile(t, dir, "Release", []byte(sampleRelease))
			if _, err := run(t, home, nil, "gpgv", "--keyring", keyring, writeFile(t, dir, "Release.gpg", detached), relPath); err != nil {
				t.Errorf("gpgv rejected Release.gpg: %v", err)
			}
			plain, signer, err := VerifyClearsigned(inRelease, public)
			if err != nil {
				t.Fatal(err)
			}
			if signer != fpr || string(plain) != sampleRelease {
				t.Errorf("VerifyClearsigned: signer %s (want %s), text equal to Release: %v", signer, fpr, string(plain) == sampleRelease)
			}
		})
	}
}

// gpgHomeWithAgentCleanup returns a GNUPGHOME whose gpg-agent is stopped when the test
// ends. The agent protects keys with a small S2K count: its calibrated default costs
// seconds per operation on a loaded machine.
func gpgHomeWithAgentCleanup(t *testing.T) string {
	t.Helper()
	home := gnupgHome(t)
	writeFile(t, home, "gpg-agent.conf", []byte("s2k-count 65536\n"))
	t.Cleanup(func() {
		if _, err := run(t, home, nil, "gpgconf", "--kill", "all"); err != nil {
			t.Logf("stop gpg-agent: %v", err)
		}
	})
	return home
}

// primaryFingerprint returns the fingerprint of the only primary key in gpg's
// --with-colons listing.
func primaryFingerprint(t *testing.T, colons []byte) string {
	t.Helper()
	lines := strings.Split(string(colons), "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "pub:") && i+1 < len(lines) && strings.HasPrefix(lines[i+1], "fpr:") {
			f := strings.Split(lines[i+1], ":")
			if len(f) > 9 {
				return f[9]
			}
		}
	}
	t.Fatalf("no primary key fingerprint in gpg listing:\n%s", colons)
	return ""
}

// TestGpgUsesOurKeys imports what WriteSecret writes (plain and passphrase-protected)
// into gpg 2.2, has gpg sign with it, and checks gpgv accepts that signature against
// our public keyring: our secret-key encoding and S2K protection are readable by gpg.
func TestGpgUsesOurKeys(t *testing.T) {
	for _, tc := range []struct{ name, fixture, passphrase string }{
		{"rsa fixture, plain", "rsa", ""},
		{"eddsa fixture, protected anew", "eddsa", "fresh passphrase"},
		{"protected fixture", "protected", protectedPassphrase},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := fixtureKey(t, tc.fixture)
			var secret bytes.Buffer
			if err := k.WriteSecret(&secret, []byte(tc.passphrase)); err != nil {
				t.Fatal(err)
			}
			home := gpgHomeWithAgentCleanup(t)
			dir := t.TempDir()
			base := []string{"--batch", "--no-tty", "--pinentry-mode", "loopback", "--passphrase", tc.passphrase}
			if _, err := run(t, home, secret.Bytes(), "gpg", append(base, "--import")...); err != nil {
				t.Fatal(err)
			}
			relPath := writeFile(t, dir, "Release", []byte(sampleRelease))
			sigPath := dir + "/Release.gpg"
			args := append(base, "--local-user", k.Fingerprint(), "--output", sigPath, "--detach-sign", relPath)
			if _, err := run(t, home, nil, "gpg", args...); err != nil {
				t.Fatalf("gpg cannot sign with our key: %v", err)
			}
			keyring := writeFile(t, dir, "pub.gpg", publicKeyring(t, k))
			if _, err := run(t, home, nil, "gpgv", "--keyring", keyring, sigPath, relPath); err != nil {
				t.Errorf("gpgv rejected gpg's signature: %v", err)
			}
		})
	}
}
