package sign

import (
	"bytes"
	"crypto"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp/armor"
)

func TestGenerate(t *testing.T) {
	created := time.Date(2026, 3, 4, 5, 6, 7, 890, time.UTC)
	for _, tc := range []struct {
		algo     Algorithm
		wantAlgo Algorithm
		bits     int
	}{
		{RSA3072, RSA3072, 3072},
		{EdDSA, EdDSA, 255},
	} {
		t.Run(string(tc.algo), func(t *testing.T) {
			k, err := Generate("Example Archive", "archive@example.org", tc.algo, created)
			if err != nil {
				t.Fatal(err)
			}
			info := k.Info()
			want := KeyInfo{
				Fingerprint: k.Fingerprint(),
				UserID:      "Example Archive <archive@example.org>",
				Algorithm:   tc.wantAlgo,
				Bits:        tc.bits,
				Created:     created.Truncate(time.Second),
			}
			if info.Fingerprint != want.Fingerprint || info.UserID != want.UserID || info.Algorithm != want.Algorithm ||
				info.Bits != want.Bits || !info.Created.Equal(want.Created) {
				t.Errorf("Info:\ngot  %+v\nwant %+v", info, want)
			}
			assertFingerprintForm(t, k.Fingerprint())
			if n := len(k.entity.Subkeys); n != 0 {
				t.Errorf("got %d subkeys, want a signing-only primary key", n)
			}
			sig := k.entity.Identities[want.UserID].SelfSignature
			if !sig.FlagsValid || !sig.FlagSign || sig.KeyLifetimeSecs != nil && *sig.KeyLifetimeSecs != 0 {
				t.Errorf("self-signature: flags valid %v sign %v lifetime %v; want a signing key without expiry",
					sig.FlagsValid, sig.FlagSign, sig.KeyLifetimeSecs)
			}
			if k.entity.PrimaryKey.Version != 4 {
				t.Errorf("key version %d, want 4", k.entity.PrimaryKey.Version)
			}
			signed, err := k.Clearsign([]byte(sampleRelease), crypto.SHA256)
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := VerifyClearsigned(signed, publicKeyring(t, k)); err != nil {
				t.Errorf("own signature does not verify: %v", err)
			}
		})
	}
}

func TestGenerateRejectsUnknownAlgorithm(t *testing.T) {
	if _, err := Generate("x", "x@example.org", "ed448", time.Time{}); err == nil {
		t.Fatal("Generate accepted algorithm ed448")
	}
}

func TestFixtureKeys(t *testing.T) {
	for _, tc := range []struct {
		name string
		want KeyInfo
	}{
		{"rsa", KeyInfo{"23126D40EA6C7D852299B8D5A413F50BCB095712", "armor test key RSA4096 <rsa@armor.invalid>", RSA4096, 4096, time.Time{}}},
		{"eddsa", KeyInfo{"46B67D6D4CA63BE43550B392875011482ECCA006", "armor test key EdDSA <eddsa@armor.invalid>", EdDSA, 255, time.Time{}}},
		{"protected", KeyInfo{"704FC81CEADEF8BB40F5E844CABEA6DA745A6801", "armor test key RSA3072 protected <protected@armor.invalid>", RSA3072, 3072, time.Time{}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.want.Created = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			k := fixtureKey(t, tc.name)
			got := k.Info()
			if got.Fingerprint != tc.want.Fingerprint || got.UserID != tc.want.UserID || got.Algorithm != tc.want.Algorithm ||
				got.Bits != tc.want.Bits || !got.Created.Equal(tc.want.Created) {
				t.Errorf("Info:\ngot  %+v\nwant %+v", got, tc.want)
			}
			// The committed public files are the public half of the secret file.
			var armored, binary bytes.Buffer
			if err := k.WritePublicArmored(&armored); err != nil {
				t.Fatal(err)
			}
			if err := k.WritePublicKeyring(&binary); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(binary.Bytes(), readFixture(t, tc.name+".pub.gpg")) {
				t.Errorf("%s.pub.gpg differs from the public part of %s.sec.asc", tc.name, tc.name)
			}
			if tc.name != "protected" && armored.String() != string(readFixture(t, tc.name+".pub.asc")) {
				t.Errorf("%s.pub.asc differs from the public part of %s.sec.asc", tc.name, tc.name)
			}
		})
	}
}

func TestSecretKeyRoundTrip(t *testing.T) {
	orig := fixtureKey(t, "eddsa")
	for _, tc := range []struct {
		name      string
		writePass string
		readPass  string
		wantErr   error
	}{
		{"plain", "", "", nil},
		{"plain ignores a passphrase", "", "unused", nil},
		{"encrypted", "s3cret", "s3cret", nil},
		{"encrypted, wrong passphrase", "s3cret", "guess", ErrWrongPassphrase},
		{"encrypted, no passphrase", "s3cret", "", ErrPassphraseRequired},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := orig.WriteSecret(&buf, []byte(tc.writePass)); err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(buf.String(), "-----BEGIN PGP PRIVATE KEY BLOCK-----\n") {
				t.Errorf("WriteSecret output is not an armored private key block:\n%s", buf.String())
			}
			assertEncrypted(t, buf.Bytes(), tc.writePass != "")
			k, err := ReadSecretKey(&buf, []byte(tc.readPass))
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("ReadSecretKey error: got %v, want %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			if k.Fingerprint() != orig.Fingerprint() {
				t.Errorf("fingerprint: got %s, want %s", k.Fingerprint(), orig.Fingerprint())
			}
			sig, err := k.DetachSign([]byte(sampleRelease), crypto.SHA512)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := VerifyDetached([]byte(sampleRelease), sig, publicKeyring(t, orig)); err != nil {
				t.Errorf("signature by the re-read key does not verify: %v", err)
			}
		})
	}
	// Writing an encrypted copy leaves the key itself usable.
	if _, err := orig.Clearsign([]byte("x\n"), crypto.SHA256); err != nil {
		t.Errorf("key unusable after WriteSecret with passphrase: %v", err)
	}
}

func TestReadSecretKeyErrors(t *testing.T) {
	both := append(readFixture(t, "rsa.sec.asc"), readFixture(t, "eddsa.sec.asc")...)
	for _, tc := range []struct {
		name    string
		input   []byte
		pass    string
		wantErr error // nil means any error
	}{
		{"public armored", readFixture(t, "rsa.pub.asc"), "", ErrNoSecretKey},
		{"public binary", readFixture(t, "eddsa.pub.gpg"), "", ErrNoSecretKey},
		{"protected without passphrase", readFixture(t, "protected.sec.asc"), "", ErrPassphraseRequired},
		{"protected with wrong passphrase", readFixture(t, "protected.sec.asc"), "nope", ErrWrongPassphrase},
		{"two secret keys", both, "", nil},
		{"empty", nil, "", nil},
		{"garbage", []byte("hello\n"), "", nil},
		{"signature block", []byte("-----BEGIN PGP SIGNATURE-----\n\nwsBcBAABCAAQBQJ=\n-----END PGP SIGNATURE-----\n"), "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, err := ReadSecretKey(bytes.NewReader(tc.input), []byte(tc.pass))
			if err == nil {
				t.Fatalf("ReadSecretKey succeeded with key %s, want an error", k.Fingerprint())
			}
			if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Errorf("error: got %v, want %v", err, tc.wantErr)
			}
		})
	}
}

func TestReadSecretKeyBinary(t *testing.T) {
	b, err := armor.Decode(bytes.NewReader(readFixture(t, "protected.sec.asc")))
	if err != nil {
		t.Fatal(err)
	}
	var bin bytes.Buffer
	if _, err := bin.ReadFrom(b.Body); err != nil {
		t.Fatal(err)
	}
	k, err := ReadSecretKey(&bin, []byte(protectedPassphrase))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := k.Fingerprint(), "704FC81CEADEF8BB40F5E844CABEA6DA745A6801"; got != want {
		t.Errorf("fingerprint: got %s, want %s", got, want)
	}
}

// assertEncrypted checks whether the secret key packets in an armored key are protected.
func assertEncrypted(t *testing.T, armored []byte, want bool) {
	t.Helper()
	list, err := ReadKeyring(armored)
	if err != nil {
		t.Fatal(err)
	}
	if got := entityEncrypted(list[0]); got != want {
		t.Errorf("secret key encrypted: got %v, want %v", got, want)
	}
}

func assertFingerprintForm(t *testing.T, fp string) {
	t.Helper()
	if len(fp) != 40 || strings.ToUpper(fp) != fp || strings.Trim(fp, "0123456789ABCDEF") != "" {
		t.Errorf("fingerprint %q is not 40 uppercase hex digits", fp)
	}
}

func TestInKeyring(t *testing.T) {
	rsa, eddsa := fixtureKey(t, "rsa"), fixtureKey(t, "eddsa")
	both := append(readFixture(t, "eddsa.pub.gpg"), readFixture(t, "rsa.pub.gpg")...)
	cases := []struct {
		name    string
		key     *Key
		keyring []byte
		ok      bool
		fprs    []string
	}{
		{"own binary keyring", rsa, readFixture(t, "rsa.pub.gpg"), true, []string{rsa.Fingerprint()}},
		{"own armored key", eddsa, readFixture(t, "eddsa.pub.asc"), true, []string{eddsa.Fingerprint()}},
		{"own secret key file", eddsa, readFixture(t, "eddsa.sec.asc"), true, []string{eddsa.Fingerprint()}},
		{"another key", rsa, readFixture(t, "eddsa.pub.gpg"), false, []string{eddsa.Fingerprint()}},
		{"one of two", rsa, both, true, []string{eddsa.Fingerprint(), rsa.Fingerprint()}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ok, fprs, err := c.key.InKeyring(c.keyring)
			if err != nil || ok != c.ok || strings.Join(fprs, " ") != strings.Join(c.fprs, " ") {
				t.Errorf("InKeyring = %v, %v, %v; want %v, %v, nil", ok, fprs, err, c.ok, c.fprs)
			}
		})
	}
	if _, _, err := rsa.InKeyring([]byte("not a keyring")); err == nil {
		t.Error("InKeyring of garbage: no error")
	}
}
