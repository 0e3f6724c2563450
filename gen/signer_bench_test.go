package gen_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/armor-apt/armor/debian/sign"
	"github.com/armor-apt/armor/debian/sign/keyuri"
	"github.com/armor-apt/armor/internal/testkit/hsmtest"
	"github.com/armor-apt/armor/internal/testkit/kmstest"
)

// BenchmarkAddOne10kSigner is BenchmarkAddOne10k with the signing key opened as armor build
// opens it, inside the timer, and the Release signed through it: the RSA 4096 key file,
// an RSA 4096 key in AWS KMS (a real local-kms on loopback, reached through the AWS SDK),
// and an RSA 4096 key on a SoftHSM2 token (PKCS#11). The difference to "file" is what a
// key that never reaches the runner costs a warm add-one (issue 30: at most 0.05 s).
func BenchmarkAddOne10kSigner(b *testing.B) {
	r := preparedRepo(b, 10_000)
	fileKey := r.Opts.Key
	b.Cleanup(func() { r.Opts.Key = fileKey })
	ctx := context.Background()

	keyFile, err := os.ReadFile(filepath.Join("..", "testdata", "keys", "rsa.sec.asc"))
	if err != nil {
		b.Fatal(err)
	}
	kms := kmstest.Start(b)
	kms.Setenv(b)
	kms.CreateKey(b, "RSA_4096", "alias/bench")
	tok := hsmtest.New(b, "bench", "1234")
	tok.GenerateRSA(b, 4096, "bench", "01")

	// certs holds each remote key's certificate, made once as armor init --key makes it.
	certs := map[string][]byte{}
	open := func(b *testing.B, uri string) *sign.Key {
		if uri == "" {
			k, err := sign.ReadSecretKey(bytes.NewReader(keyFile), nil)
			if err != nil {
				b.Fatal(err)
			}
			return k
		}
		s, err := keyuri.Open(ctx, uri, []byte("1234"))
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
			open(b, tc.uri).Close() // the certificate, outside the timer
			var m meter
			b.StopTimer()
			b.ResetTimer()
			for range b.N {
				r.addExtra(b)
				m.start(b)
				t0 := time.Now()
				k := open(b, tc.uri)
				r.Opts.Key = k
				res, _ := r.build(b)
				m.stop(b, time.Since(t0))
				if s := res.Stats; s.Read != 1 || s.Added != 1 || s.IndexesWritten != 1 {
					b.Fatalf("add one: stats %+v", s)
				}
				r.removeExtra(b)
				r.build(b)
				k.Close()
			}
			m.report(b)
		})
	}
}
