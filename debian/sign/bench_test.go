package sign

import (
	"bytes"
	"crypto"
	"fmt"
	"testing"
)

// release10K returns a Release-like text of about 10 KiB.
func release10K() []byte {
	var b bytes.Buffer
	b.WriteString("Origin: bench\nLabel: bench\nSuite: stable\nCodename: stable\nSHA256:\n")
	for i := 0; b.Len() < 10<<10; i++ {
		fmt.Fprintf(&b, " %064x %8d main/binary-amd64/Packages%d\n", i, i*1000, i)
	}
	return b.Bytes()
}

func BenchmarkClearsign10KiB(b *testing.B) {
	data := release10K()
	for _, name := range []string{"rsa", "eddsa"} { // rsa is RSA4096
		k := fixtureKey(b, name)
		b.Run(string(k.Info().Algorithm), func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if _, err := k.Clearsign(data, crypto.SHA512); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkVerifyClearsigned10KiB(b *testing.B) {
	data := release10K()
	for _, name := range []string{"rsa", "eddsa"} {
		k := fixtureKey(b, name)
		signed, err := k.Clearsign(data, crypto.SHA512)
		if err != nil {
			b.Fatal(err)
		}
		keyring := readFixture(b, name+".pub.gpg")
		b.Run(string(k.Info().Algorithm), func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if _, _, err := VerifyClearsigned(signed, keyring); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
