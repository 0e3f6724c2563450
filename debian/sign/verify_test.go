package sign

import (
	"bytes"
	"crypto"
	"errors"
	"strings"
	"testing"

	"github.com/ProtonMail/go-crypto/openpgp/armor"
)

func TestVerifyClearsigned(t *testing.T) {
	rsa := fixtureKey(t, "rsa")
	release := []byte(sampleRelease)
	signed, err := rsa.Clearsign(release, crypto.SHA512)
	if err != nil {
		t.Fatal(err)
	}
	rsaPub, rsaAsc := readFixture(t, "rsa.pub.gpg"), readFixture(t, "rsa.pub.asc")
	eddsaPub, eddsaAsc := readFixture(t, "eddsa.pub.gpg"), readFixture(t, "eddsa.pub.asc")
	cat := func(bs ...[]byte) []byte { return bytes.Join(bs, nil) }

	for _, tc := range []struct {
		name     string
		msg      []byte
		keyrings [][]byte
		wantErr  error // nil: success
		anyErr   bool  // an error that is neither ErrBadSignature nor ErrUnknownKey
	}{
		{"binary keyring", signed, [][]byte{rsaPub}, nil, false},
		{"armored keyring", signed, [][]byte{rsaAsc}, nil, false},
		{"second of several keyrings", signed, [][]byte{eddsaPub, rsaAsc}, nil, false},
		{"concatenated binary keyring", signed, [][]byte{cat(eddsaPub, rsaPub)}, nil, false},
		{"concatenated armored keyring", signed, [][]byte{cat(eddsaAsc, rsaAsc)}, nil, false},
		{"leading blank lines", cat([]byte("\n\n"), signed), [][]byte{rsaPub}, nil, false},
		{"tampered text", bytes.Replace(signed, []byte("Suite: stable"), []byte("Suite: stabld"), 1), [][]byte{rsaPub}, ErrBadSignature, false},
		{"added line", bytes.Replace(signed, []byte("Components: main\n"), []byte("Components: main\nX: y\n"), 1), [][]byte{rsaPub}, ErrBadSignature, false},
		{"other key", signed, [][]byte{eddsaPub}, ErrUnknownKey, false},
		{"text before", cat([]byte("Origin: evil\n"), signed), [][]byte{rsaPub}, ErrBadSignature, false},
		{"text after", cat(signed, []byte("Origin: evil\n")), [][]byte{rsaPub}, ErrBadSignature, false},
		{"corrupted signature", corruptSignature(t, signed), [][]byte{rsaPub}, ErrBadSignature, false},
		{"corrupted CRC", corruptCRC(t, signed), [][]byte{rsaPub}, ErrBadSignature, false},
		{"Hash header disagrees", bytes.Replace(signed, []byte("Hash: SHA512"), []byte("Hash: SHA256"), 1), [][]byte{rsaPub}, ErrBadSignature, false},
		{"plain Release", release, [][]byte{rsaPub}, ErrBadSignature, false},
		{"empty", nil, [][]byte{rsaPub}, ErrBadSignature, false},
		{"no keyring", signed, nil, nil, true},
		{"garbage keyring", signed, [][]byte{[]byte("not a key")}, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plain, fp, err := VerifyClearsigned(tc.msg, tc.keyrings...)
			switch {
			case tc.anyErr:
				if err == nil || errors.Is(err, ErrBadSignature) || errors.Is(err, ErrUnknownKey) {
					t.Fatalf("error: got %v, want a keyring error", err)
				}
			case tc.wantErr != nil:
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("error: got %v, want %v", err, tc.wantErr)
				}
				if plain != nil || fp != "" {
					t.Errorf("got text %q and signer %q along with an error", plain, fp)
				}
			default:
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(plain, release) {
					t.Errorf("text:\ngot  %q\nwant %q", plain, release)
				}
				if fp != rsa.Fingerprint() {
					t.Errorf("signer: got %s, want %s", fp, rsa.Fingerprint())
				}
			}
		})
	}
}

func TestVerifyDetached(t *testing.T) {
	eddsa := fixtureKey(t, "eddsa")
	release := []byte(sampleRelease)
	sig, err := eddsa.DetachSign(release, crypto.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	binarySig := dearmor(t, sig)
	eddsaPub, rsaPub := readFixture(t, "eddsa.pub.gpg"), readFixture(t, "rsa.pub.gpg")

	for _, tc := range []struct {
		name     string
		signed   []byte
		sig      []byte
		keyrings [][]byte
		wantErr  error
	}{
		{"armored", release, sig, [][]byte{eddsaPub}, nil},
		{"binary", release, binarySig, [][]byte{eddsaPub}, nil},
		{"with another key first", release, sig, [][]byte{rsaPub, readFixture(t, "eddsa.pub.asc")}, nil},
		{"tampered", bytes.Replace(release, []byte("amd64 arm64"), []byte("amd64 i386"), 1), sig, [][]byte{eddsaPub}, ErrBadSignature},
		{"truncated Release", release[:len(release)-1], sig, [][]byte{eddsaPub}, ErrBadSignature},
		{"other key", release, sig, [][]byte{rsaPub}, ErrUnknownKey},
		{"empty signature", release, nil, [][]byte{eddsaPub}, ErrBadSignature},
		{"truncated binary signature", release, binarySig[:len(binarySig)/2], [][]byte{eddsaPub}, ErrBadSignature},
		{"public key instead of signature", release, readFixture(t, "eddsa.pub.asc"), [][]byte{eddsaPub}, ErrBadSignature},
		{"clear-signed message instead", release, mustClearsign(t, eddsa, release), [][]byte{eddsaPub}, ErrBadSignature},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fp, err := VerifyDetached(tc.signed, tc.sig, tc.keyrings...)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("error: got %v, want %v", err, tc.wantErr)
			}
			if err == nil && fp != eddsa.Fingerprint() {
				t.Errorf("signer: got %s, want %s", fp, eddsa.Fingerprint())
			}
		})
	}
}

func TestClearsignRefusesUnsignableText(t *testing.T) {
	k := fixtureKey(t, "eddsa")
	for _, tc := range []struct {
		name string
		text string
		hash crypto.Hash
	}{
		{"trailing space", "Origin: x \nLabel: y\n", crypto.SHA256},
		{"trailing tab at end", "Origin: x\nLabel: y\t", crypto.SHA256},
		{"carriage return", "Origin: x\r\nLabel: y\r\n", crypto.SHA256},
		{"SHA-1", "Origin: x\n", crypto.SHA1},
		{"MD5", "Origin: x\n", crypto.MD5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if out, err := k.Clearsign([]byte(tc.text), tc.hash); err == nil {
				t.Fatalf("Clearsign succeeded:\n%s", out)
			}
		})
	}
	if _, err := k.DetachSign([]byte("x"), crypto.SHA1); err == nil {
		t.Error("DetachSign accepted SHA-1")
	}
}

func TestDefaultHashIsSHA512(t *testing.T) {
	k := fixtureKey(t, "eddsa")
	signed := mustClearsign(t, k, []byte(sampleRelease))
	if !bytes.Contains(signed, []byte("\nHash: SHA512\n")) {
		t.Errorf("no SHA512 Hash header in:\n%s", signed)
	}
	assertHash(t, clearsignedSignature(t, signed), crypto.SHA512)
}

func mustClearsign(t *testing.T, k *Key, data []byte) []byte {
	t.Helper()
	out, err := k.Clearsign(data, 0)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func dearmor(t testing.TB, armored []byte) []byte {
	t.Helper()
	b, err := armor.Decode(bytes.NewReader(armored))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(b.Body); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// corruptSignature flips a bit in the signature's MPI and re-armors it with a valid CRC.
func corruptSignature(t *testing.T, msg []byte) []byte {
	t.Helper()
	i := bytes.LastIndex(msg, []byte("\n-----BEGIN PGP SIGNATURE-----\n"))
	sig := dearmor(t, msg[i+1:])
	sig[len(sig)-3] ^= 0x01
	var out bytes.Buffer
	out.Write(msg[:i+1])
	if err := writeArmored(&out, "PGP SIGNATURE", sig); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// corruptCRC replaces the CRC24 line of a clear-signed message with a wrong one.
func corruptCRC(t *testing.T, msg []byte) []byte {
	t.Helper()
	lines := strings.Split(string(msg), "\n")
	n := len(lines) - 3 // ..., "=CRC", "-----END PGP SIGNATURE-----", ""
	if !strings.HasPrefix(lines[n], "=") {
		t.Fatalf("no CRC line at %d in:\n%s", n, msg)
	}
	if lines[n] == "=AAAA" {
		lines[n] = "=BBBB"
	} else {
		lines[n] = "=AAAA"
	}
	return []byte(strings.Join(lines, "\n"))
}
