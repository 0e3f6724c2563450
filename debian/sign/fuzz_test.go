package sign

import (
	"bytes"
	"crypto"
	"testing"
)

// The fuzz targets check that parsing outside input never panics and that whatever
// is accepted is consistent. Run one with e.g.
// go test ./debian/sign -run '^$' -fuzz FuzzReadKeyring -fuzztime 1m -fuzzminimizetime 5s
// (minimizing a large key input with the default 60 s looks like a stall).

func FuzzReadSecretKey(f *testing.F) {
	for _, name := range []string{"rsa.sec.asc", "eddsa.sec.asc", "protected.sec.asc", "rsa.pub.asc", "eddsa.pub.gpg"} {
		f.Add(readFixture(f, name), []byte(protectedPassphrase))
	}
	f.Add(dearmor(f, readFixture(f, "eddsa.sec.asc")), []byte(nil))
	f.Add([]byte("-----BEGIN PGP PRIVATE KEY BLOCK-----\n\n=AAAA\n-----END PGP PRIVATE KEY BLOCK-----\n"), []byte(nil))
	f.Fuzz(func(t *testing.T, data, pass []byte) {
		k, err := ReadSecretKey(bytes.NewReader(data), pass)
		if err != nil {
			return
		}
		if fp := k.Fingerprint(); len(fp) != 40 {
			t.Errorf("fingerprint %q", fp)
		}
		_ = k.Info()
	})
}

func FuzzReadKeyring(f *testing.F) {
	for _, name := range []string{"rsa.pub.asc", "rsa.pub.gpg", "eddsa.pub.asc", "eddsa.pub.gpg", "protected.pub.gpg", "eddsa.sec.asc"} {
		f.Add(readFixture(f, name))
	}
	f.Add(append(readFixture(f, "rsa.pub.asc"), readFixture(f, "eddsa.pub.asc")...))
	f.Add([]byte("-----BEGIN PGP PUBLIC KEY BLOCK-----\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		list, err := ReadKeyring(data)
		if err == nil && len(list) == 0 {
			t.Error("ReadKeyring returned no keys and no error")
		}
	})
}

func FuzzVerifyClearsigned(f *testing.F) {
	k := fixtureKey(f, "eddsa")
	keyring := readFixture(f, "eddsa.pub.gpg")
	for _, text := range []string{sampleRelease, "", "-x\n", "a\n\nb"} {
		signed, err := k.Clearsign([]byte(text), crypto.SHA256)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(signed)
	}
	f.Add([]byte("-----BEGIN PGP SIGNED MESSAGE-----\nHash: SHA256\n\nx\n-----BEGIN PGP SIGNATURE-----\n\n=AAAA\n-----END PGP SIGNATURE-----\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		plain, fp, err := VerifyClearsigned(data, keyring)
		if err != nil {
			return
		}
		if fp != k.Fingerprint() {
			t.Errorf("accepted with signer %s", fp)
		}
		// Accepted text that can be clear-signed comes back unchanged when signed afresh.
		if checkClearsignable(plain) != nil {
			return
		}
		again, err := k.Clearsign(plain, crypto.SHA256)
		if err != nil {
			t.Fatal(err)
		}
		plain2, _, err := VerifyClearsigned(again, keyring)
		if err != nil || !bytes.Equal(plain2, plain) {
			t.Errorf("re-signed text: got %q, %v; want %q", plain2, err, plain)
		}
	})
}
