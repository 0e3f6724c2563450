package sign

import (
	"bytes"
	"crypto"
	"io"
	"testing"

	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"github.com/ProtonMail/go-crypto/openpgp/clearsign"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
)

var hashes = []struct {
	name string
	h    crypto.Hash
}{{"sha256", crypto.SHA256}, {"sha512", crypto.SHA512}}

// TestRealVerifiersAccept signs with each fixture key and hash and checks that gpgv (for
// InRelease and Release.gpg) and sqv (for Release.gpg) accept the signatures, that gpgv
// recovers exactly the Release bytes from InRelease, and that all reject a tampered file.
func TestRealVerifiersAccept(t *testing.T) {
	for _, keyName := range []string{"rsa", "eddsa", "protected"} {
		key := fixtureKey(t, keyName)
		for _, hc := range hashes {
			t.Run(keyName+"/"+hc.name, func(t *testing.T) {
				home := gnupgHome(t)
				dir := t.TempDir()
				keyring := writeFile(t, dir, "key.gpg", publicKeyring(t, key))
				release := []byte(sampleRelease)
				inRelease, err := key.Clearsign(release, hc.h)
				if err != nil {
					t.Fatal(err)
				}
				detached, err := key.DetachSign(release, hc.h)
				if err != nil {
					t.Fatal(err)
				}
				assertHash(t, clearsignedSignature(t, inRelease), hc.h)
				assertHash(t, armoredSignature(t, detached), hc.h)
				assertCRC(t, inRelease)
				assertCRC(t, detached)
				for _, b := range [][]byte{inRelease, detached} {
					if !bytes.HasSuffix(b, []byte("\n-----END PGP SIGNATURE-----\n")) {
						t.Errorf("signature does not end with the END line and a newline: %q", b[max(0, len(b)-40):])
					}
				}

				inPath := writeFile(t, dir, "InRelease", inRelease)
				relPath := writeFile(t, dir, "Release", release)
				sigPath := writeFile(t, dir, "Release.gpg", detached)

				out, err := run(t, home, nil, "gpgv", "--keyring", keyring, "--output", "-", inPath)
				if err != nil {
					t.Fatalf("gpgv rejected InRelease: %v", err)
				}
				if want := gpgvOutput(release); !bytes.Equal(out, want) {
					t.Errorf("gpgv's signed text differs from Release:\ngot  %q\nwant %q", out, want)
				}
				if _, err := run(t, home, nil, "gpgv", "--keyring", keyring, sigPath, relPath); err != nil {
					t.Errorf("gpgv rejected Release.gpg: %v", err)
				}
				if _, err := run(t, home, nil, "sqv", "--keyring", keyring, sigPath, relPath); err != nil {
					t.Errorf("sqv rejected Release.gpg: %v", err)
				}

				tampered := bytes.Replace(release, []byte("stable"), []byte("stabld"), 1)
				badRel := writeFile(t, dir, "Release.bad", tampered)
				badIn := writeFile(t, dir, "InRelease.bad", bytes.Replace(inRelease, []byte("stable"), []byte("stabld"), 1))
				if _, err := run(t, home, nil, "gpgv", "--keyring", keyring, badIn); err == nil {
					t.Error("gpgv accepted a tampered InRelease")
				}
				if _, err := run(t, home, nil, "gpgv", "--keyring", keyring, sigPath, badRel); err == nil {
					t.Error("gpgv accepted Release.gpg for a tampered Release")
				}
				if _, err := run(t, home, nil, "sqv", "--keyring", keyring, sigPath, badRel); err == nil {
					t.Error("sqv accepted Release.gpg for a tampered Release")
				}
			})
		}
	}
}

// TestClearsignRoundTripGpgv checks texts that stress clear-signing (dash-escaping, blank
// lines, missing or doubled final newline) come back unchanged from gpgv and from
// VerifyClearsigned.
func TestClearsignRoundTripGpgv(t *testing.T) {
	key := fixtureKey(t, "eddsa")
	home := gnupgHome(t)
	dir := t.TempDir()
	keyring := writeFile(t, dir, "key.gpg", publicKeyring(t, key))
	for _, tc := range []struct{ name, text string }{
		{"release", sampleRelease},
		{"no final newline", "Origin: x\nLabel: y"},
		{"blank lines", "a\n\nb\n\n"},
		{"dashes", "-----BEGIN PGP SIGNATURE-----\n- x\n--\n-\n"},
		{"inner spaces", "a  b\tc\n d\n"},
		{"one newline", "\n"},
		{"empty", ""},
		{"utf-8", "Description: caf\u00e9 \u2013 na\u00efve\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			signed, err := key.Clearsign([]byte(tc.text), crypto.SHA512)
			if err != nil {
				t.Fatal(err)
			}
			p := writeFile(t, dir, "InRelease", signed)
			out, err := run(t, home, nil, "gpgv", "--keyring", keyring, "--output", "-", p)
			if err != nil {
				t.Fatalf("gpgv rejected:\n%s\n%v", signed, err)
			}
			if want := gpgvOutput([]byte(tc.text)); !bytes.Equal(out, want) {
				t.Errorf("gpgv text: got %q, want %q", out, want)
			}
			plain, fp, err := VerifyClearsigned(signed, publicKeyring(t, key))
			if err != nil {
				t.Fatal(err)
			}
			if string(plain) != tc.text {
				t.Errorf("VerifyClearsigned text: got %q, want %q", plain, tc.text)
			}
			if fp != key.Fingerprint() {
				t.Errorf("fingerprint: got %s, want %s", fp, key.Fingerprint())
			}
		})
	}
}

// gpgvOutput is what `gpgv --output -` prints for a clear-signed text: the signed text
// followed by the line ending that separates it from the signature, which OpenPGP
// leaves out of the signed text (RFC 4880, section 7.1) and apt drops too.
func gpgvOutput(text []byte) []byte {
	return append(append([]byte(nil), text...), '\n')
}

func clearsignedSignature(t *testing.T, msg []byte) *packet.Signature {
	t.Helper()
	b, rest := clearsign.Decode(msg)
	if b == nil {
		t.Fatalf("not a clear-signed message:\n%s", msg)
	}
	if len(bytes.TrimSpace(rest)) > 0 {
		t.Fatalf("text after the signature: %q", rest)
	}
	return readSignaturePacket(t, b.ArmoredSignature)
}

func armoredSignature(t *testing.T, sig []byte) *packet.Signature {
	t.Helper()
	b, err := armor.Decode(bytes.NewReader(sig))
	if err != nil {
		t.Fatal(err)
	}
	return readSignaturePacket(t, b)
}

// armoredBlock returns the body of an armored block.
func armoredBlock(t *testing.T, armored []byte) io.Reader {
	t.Helper()
	b, err := armor.Decode(bytes.NewReader(armored))
	if err != nil {
		t.Fatal(err)
	}
	return b.Body
}

func readSignaturePacket(t *testing.T, b *armor.Block) *packet.Signature {
	t.Helper()
	p, err := packet.NewReader(b.Body).Next()
	if err != nil {
		t.Fatal(err)
	}
	s, ok := p.(*packet.Signature)
	if !ok {
		t.Fatalf("got %T, want a signature packet", p)
	}
	return s
}

func assertHash(t *testing.T, s *packet.Signature, want crypto.Hash) {
	t.Helper()
	if s.Hash != want {
		t.Errorf("signature hash: got %v, want %v", s.Hash, want)
	}
	if s.Version != 4 {
		t.Errorf("signature version: got %d, want 4", s.Version)
	}
}

// assertCRC checks that the armored signature ends with a "=XXXX" CRC24 line.
func assertCRC(t *testing.T, armored []byte) {
	t.Helper()
	lines := bytes.Split(bytes.TrimRight(armored, "\n"), []byte("\n"))
	if len(lines) < 2 {
		t.Fatalf("armored signature too short: %q", armored)
	}
	crc := lines[len(lines)-2]
	if len(crc) != 5 || crc[0] != '=' {
		t.Errorf("line before END is %q, want a CRC24 line like =AbCd", crc)
	}
}
