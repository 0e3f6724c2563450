package index

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"syscall"
	"testing"
	"time"
)

// cpuTime returns the CPU time this process has used (all threads, user and system). Wall
// time per op depends on what else the machine runs; CPU time much less.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

var benchStanzas = map[int]func() [][]byte{
	10_000:  sync.OnceValue(func() [][]byte { return synthStanzas(10_000, 1) }),
	100_000: sync.OnceValue(func() [][]byte { return synthStanzas(100_000, 1) }),
}

// BenchmarkBuild measures a first build into an empty cache ("cold"), and the case that
// matters: a build after one stanza was inserted in the middle, with the cache of the
// previous build ("insert"). Both include laying out the plain bytes.
func BenchmarkBuild(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("n=%d/cold", n), func(b *testing.B) {
			stanzas := benchStanzas[n]()
			cpu0, ops := cpuTime(b), 0
			for b.Loop() {
				ops++
				b.StopTimer()
				dir := b.TempDir()
				b.StartTimer()
				c, err := OpenCache(dir)
				if err != nil {
					b.Fatal(err)
				}
				f, err := Build(stanzas, c)
				if err != nil {
					b.Fatal(err)
				}
				reportSizes(b, f)
			}
			b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(ops)/1e6, "cpu-ms/op")
		})
		b.Run(fmt.Sprintf("n=%d/insert", n), func(b *testing.B) {
			benchInsert(b, benchStanzas[n](), defaultChunking)
		})
	}
}

// benchInsert builds stanzas into a cache, then times builds that each insert a new stanza
// in the middle (a different one each time, so that its chunk is never in the cache).
func benchInsert(b *testing.B, stanzas [][]byte, ck chunking) {
	dir := b.TempDir()
	c, err := OpenCache(dir)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := build(stanzas, c, ck); err != nil {
		b.Fatal(err)
	}
	mid := len(stanzas) / 2
	r := rand.New(rand.NewPCG(99, 1))
	i := 0
	var misses int64
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime(b)
	for b.Loop() {
		i++
		s := synthStanza(r, fmt.Sprintf("%s-x%d", synthName(mid-1), i), "1.0-1")
		c, err := OpenCache(dir)
		if err != nil {
			b.Fatal(err)
		}
		f, err := build(insertAt(stanzas, mid, s), c, ck)
		if err != nil {
			b.Fatal(err)
		}
		misses += c.Stats().Misses
		reportSizes(b, f)
	}
	b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(i)/1e6, "cpu-ms/op")
	b.ReportMetric(float64(misses)/float64(i), "compressed-chunks/op")
}

func reportSizes(b *testing.B, f *Files) {
	b.ReportMetric(float64(len(f.Plain))/1e6, "plain-MB")
	b.ReportMetric(float64(len(f.Gzip))/1e6, "gz-MB")
	b.ReportMetric(float64(len(f.Xz))/1e6, "xz-MB")
}

// BenchmarkChunkSize shows what the chunk size trades: the cost of an incremental build
// (one or two chunks recompressed) against the size of the compressed index (each chunk
// starts with an empty dictionary).
func BenchmarkChunkSize(b *testing.B) {
	stanzas := benchStanzas[100_000]()
	for _, avg := range []int{64 << 10, 256 << 10, 1 << 20} {
		ck := chunking{min: avg / 4, avg: avg, max: 4 * avg}
		b.Run(fmt.Sprintf("avg=%dKiB", avg>>10), func(b *testing.B) {
			benchInsert(b, stanzas, ck)
		})
	}
}
