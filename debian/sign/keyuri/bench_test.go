package keyuri

import (
	"bytes"
	"context"
	"crypto"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/armor-apt/armor/debian/sign"
	"github.com/armor-apt/armor/internal/testkit/hsmtest"
	"github.com/armor-apt/armor/internal/testkit/kmstest"
)

// BenchmarkOpenAndSign is what signing costs one armor build beyond building: open the
// key as the build does (read and decrypt the key file; or open the signer and match it
// with its certificate) and sign one Release, with an RSA 4096 key in each place: a key
// file, AWS KMS (a real local-kms on loopback) and a SoftHSM2 token. Its differences to
// "file" are what a key kept off the runner adds to an add-one build (issue 30's budget:
// 0.05 s); BenchmarkAddOne10kSigner in gen measures the whole build.
func BenchmarkOpenAndSign(b *testing.B) {
	ctx := context.Background()
	release := bytes.Repeat([]byte("SHA256:\n 0f3c3f1d2f8a1d3e9d6c0b6b2fa1c9f6a55e3f0f7c1e6c7b5d1a8e4f9b2c3d4e 1234 main/binary-amd64/Packages\n"), 40)
	keyFile, err := os.ReadFile(filepath.Join("..", "..", "..", "testdata", "keys", "rsa.sec.asc"))
	if err != nil {
		b.Fatal(err)
	}
	kms := kmstest.Start(b)
	kms.Setenv(b)
	kms.CreateKey(b, "RSA_4096", "alias/bench")
	tok := hsmtest.New(b, "bench", "1234")
	tok.GenerateRSA(b, 4096, "bench", "01")
	certs := map[string][]byte{}
	open := func(b *testing.B, uri string) *sign.Key {
		if uri == "" {
			k, err := sign.ReadSecretKey(bytes.NewReader(keyFile), nil)
			if err != nil {
				b.Fatal(err)
			}
			return k
		}
		s, err := Open(ctx, uri, []byte("1234"))
		if err != nil {
			b.Fatal(err)
		}
		if certs[uri] == nil {
			k, err := sign.Certify(ctx, s, uri, "bench", time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			if err != nil {
				b.Fatal(err)
			}
			var buf bytes.Buffer
			k.WritePublicKeyring(&buf)
			certs[uri] = buf.Bytes()
		}
		k, err := sign.NewKey(s, uri, certs[uri])
		if err != nil {
			b.Fatal(err)
		}
		return k
	}
	for _, tc := range []struct{ name, uri string }{
		{"file", ""},
		{"awskms", "awskms:///alias/bench"},
		{"pkcs11", tok.URI("bench")},
	} {
		b.Run(tc.name, func(b *testing.B) {
			open(b, tc.uri).Close()
			b.ResetTimer()
			for range b.N {
				k := open(b, tc.uri)
				if _, _, err := k.SignRelease(ctx, release, crypto.SHA512, time.Now()); err != nil {
					b.Fatal(err)
				}
				k.Close()
			}
		})
	}
}
