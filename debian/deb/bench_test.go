package deb

import (
	"bytes"
	"crypto/sha256"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/armor-apt/armor/internal/testkit/synth"
)

// The build must read 10,000 small packages in at most twice the time it takes
// to read and SHA-256 each file once. Compare BenchmarkReadFile with
// BenchmarkReadSHA256: both handle one file of a 1,000-package synthetic
// repository per iteration.

func synthFiles(b *testing.B) []string {
	b.Helper()
	paths, err := synth.Write(b.TempDir(), synth.Options{N: 1000, Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	return paths
}

func BenchmarkReadFile(b *testing.B) {
	paths := synthFiles(b)
	b.ReportAllocs()
	defer reportCPU(b)()
	for i := 0; b.Loop(); i++ {
		if _, err := ReadFile(paths[i%len(paths)]); err != nil {
			b.Fatal(err)
		}
	}
}

// reportCPU adds a cpu-ns/op metric: the process's user and system time per
// iteration, which a busy machine disturbs less than wall time.
func reportCPU(b *testing.B) func() {
	start := cpuTime()
	return func() {
		b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
	}
}

func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

func BenchmarkReadSHA256(b *testing.B) {
	paths := synthFiles(b)
	buf := make([]byte, 64<<10)
	b.ReportAllocs()
	defer reportCPU(b)()
	for i := 0; b.Loop(); i++ {
		f, err := os.Open(paths[i%len(paths)])
		if err != nil {
			b.Fatal(err)
		}
		h := sha256.New()
		if _, err := io.CopyBuffer(h, struct{ io.Reader }{f}, buf); err != nil {
			b.Fatal(err)
		}
		h.Sum(nil)
		f.Close()
	}
}

// BenchmarkReadFileReal reads the real packages, whose control.tar is
// xz-compressed with an 8 MiB dictionary.
func BenchmarkReadFileReal(b *testing.B) {
	paths := realDebs(b)
	b.ReportAllocs()
	defer reportCPU(b)()
	for i := 0; b.Loop(); i++ {
		if _, err := ReadFile(paths[i%len(paths)]); err != nil {
			b.Fatal(err)
		}
	}
}

// largeDeb writes a package with a 32 MiB payload that does not compress.
func largeDeb(b *testing.B) string {
	b.Helper()
	payload := make([]byte, 32<<20)
	var x uint64 = 1
	for i := range payload {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		payload[i] = byte(x)
	}
	var buf bytes.Buffer
	err := synth.Encode(&buf, synth.Deb{
		Control:   []byte(goodControl),
		Files:     []synth.File{{Path: "usr/share/big", Data: payload}},
		StoreData: true,
	})
	if err != nil {
		b.Fatal(err)
	}
	p := filepath.Join(b.TempDir(), "big_1.0_amd64.deb")
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(buf.Len()))
	return p
}

// BenchmarkReadFileLarge and BenchmarkReadSHA256Large compare the two on one
// 32 MiB package, where hashing dominates.
func BenchmarkReadFileLarge(b *testing.B) {
	p := largeDeb(b)
	defer reportCPU(b)()
	for b.Loop() {
		if _, err := ReadFile(p); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkReadSHA256Large(b *testing.B) {
	p := largeDeb(b)
	buf := make([]byte, 256<<10)
	defer reportCPU(b)()
	for b.Loop() {
		f, err := os.Open(p)
		if err != nil {
			b.Fatal(err)
		}
		h := sha256.New()
		if _, err := io.CopyBuffer(h, struct{ io.Reader }{f}, buf); err != nil {
			b.Fatal(err)
		}
		f.Close()
	}
}
