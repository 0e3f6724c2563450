package gen_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/armor-apt/armor/debian/sign"
	"github.com/armor-apt/armor/debian/sign/keyuri"
	"github.com/armor-apt/armor/internal/testkit/benchkit"
	"github.com/armor-apt/armor/internal/testkit/hsmtest"
	"github.com/armor-apt/armor/internal/testkit/kmstest"
)

// BenchmarkAddOne10kSigner is BenchmarkAddOne10k with the signing key opened as armor build
// opens it, inside the timer, and the Release signed through it: the RSA 4096 key file,
// an RSA 4096 key in AWS KMS (a real local-kms on loopback, reached through the AWS SDK),
// and an RSA 4096 key on a SoftHSM2 token (PKCS#11). The difference to "file" is what a
// key that never reaches the runner costs a warm add-one (issue 30: at most 0.05 s). The
// signers take turns within each iteration; it reports each one's median wall and CPU
// time per add-one, and the median of its paired difference to the key file.
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
	signers := []struct{ name, uri string }{
		{"file", ""},
		{"awskms", "awskms:///alias/bench"},
		{"pkcs11", tok.URI("bench")},
	}
	for _, sg := range signers {
		open(b, sg.uri).Close() // the certificates, outside the timer
	}
	// Each iteration adds one package with each signer in turn, so each signer's figure
	// pairs with the key file's of the same iteration: the machine's drift between
	// iterations falls out of the differences.
	wall := make([][]time.Duration, len(signers))
	cpu := make([][]time.Duration, len(signers))
	b.StopTimer()
	b.ResetTimer()
	for range b.N {
		for i, sg := range signers {
			r.addExtra(b)
			b.StartTimer()
			t0, c0 := time.Now(), benchkit.CPU(b)
			k := open(b, sg.uri)
			r.Opts.Key = k
			res, _ := r.build(b)
			c1, t1 := benchkit.CPU(b), time.Now()
			b.StopTimer()
			wall[i], cpu[i] = append(wall[i], t1.Sub(t0)), append(cpu[i], c1-c0)
			if s := res.Stats; s.Read != 1 || s.Added != 1 || s.IndexesWritten != 1 {
				b.Fatalf("add one with %s: stats %+v", sg.name, s)
			}
			r.removeExtra(b)
			r.build(b)
			k.Close()
		}
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	for i, sg := range signers {
		b.ReportMetric(ms(median(wall[i])), sg.name+"-ms")
		b.ReportMetric(ms(median(cpu[i])), sg.name+"-cpu-ms")
		if i == 0 {
			continue
		}
		dw, dc := make([]time.Duration, b.N), make([]time.Duration, b.N)
		for j := range b.N {
			dw[j], dc[j] = wall[i][j]-wall[0][j], cpu[i][j]-cpu[0][j]
		}
		b.ReportMetric(ms(median(dw)), sg.name+"-minus-file-ms")
		b.ReportMetric(ms(median(dc)), sg.name+"-minus-file-cpu-ms")
	}
}

// median is the middle of ds (the mean of the two middle ones for an even count).
func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
