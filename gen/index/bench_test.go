package index

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
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
// previous build ("insert"). "add" inserts each stanza into the index the build before
// made, as successive armor builds do, and "add-on-base" builds each on the Base relating
// it to that index, as a warm armor build does. All include laying out the plain bytes.
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
				f, err := Build(stanzas, c, "bench")
				if err != nil {
					b.Fatal(err)
				}
				reportSizes(b, f)
			}
			b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(ops)/1e6, "cpu-ms/op")
		})
		b.Run(fmt.Sprintf("n=%d/insert", n), func(b *testing.B) {
			benchInsert(b, benchStanzas[n](), defaultChunking, insertOnly)
		})
		b.Run(fmt.Sprintf("n=%d/add", n), func(b *testing.B) {
			benchInsert(b, benchStanzas[n](), defaultChunking, add)
		})
		b.Run(fmt.Sprintf("n=%d/add-on-base", n), func(b *testing.B) {
			benchInsert(b, benchStanzas[n](), defaultChunking, addOnBase)
		})
	}
}

// How benchInsert inserts.
const (
	insertOnly = iota // into the first index
	add               // into the index of the build before
	addOnBase         // the same, built on the Base relating the two
)

// benchInsert builds stanzas into a cache, then times builds that each insert a new stanza
// at a random place (a different one each time, so that its chunk is never in the cache).
func benchInsert(b *testing.B, stanzas [][]byte, ck chunking, mode int) {
	dir := b.TempDir()
	c, err := OpenCache(dir)
	if err != nil {
		b.Fatal(err)
	}
	prev, err := build(stanzas, c, "bench", ck, nil)
	if err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(99, 1))
	i := 0
	var misses int64
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime(b)
	for b.Loop() {
		i++
		at := 1 + r.IntN(len(stanzas)-1)
		s := synthStanza(r, fmt.Sprintf("%s-x%d", synthName(at-1), i), "1.0-1")
		c, err := OpenCache(dir)
		if err != nil {
			b.Fatal(err)
		}
		next := insertAt(stanzas, at, s)
		var base *Base
		if mode == addOnBase {
			head := 0
			for _, s := range stanzas[:at] {
				head += len(s) + 1
			}
			base = &Base{SHA256: prev.Digests[0].SHA256, Head: head, Tail: len(prev.Plain) - head}
		}
		f, err := build(next, c, "bench", ck, base)
		if err != nil {
			b.Fatal(err)
		}
		if mode != insertOnly {
			stanzas, prev = next, f
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

// BenchmarkChunkSize shows what the shape of the chunk sizes trades: the cost of an
// incremental build (one chunk's gzip member and two chunks' LZMA2 data recompressed)
// against the size of the compressed index. Each op inserts a stanza at a random place of
// 10,000: the chunk it lands in is larger than the average chunk, the more so the wider
// the sizes range. BenchmarkDebianXZBlocks gives the same shapes' Packages.xz ratio.
func BenchmarkChunkSize(b *testing.B) {
	stanzas := benchStanzas[10_000]()
	for _, ck := range chunkShapes {
		b.Run(ck.String(), func(b *testing.B) {
			benchInsert(b, stanzas, ck, insertOnly)
		})
	}
}

// chunkShapes are the chunkings BenchmarkChunkSize and BenchmarkDebianXZBlocks compare.
var chunkShapes = []chunking{
	{min: 32 << 10, avg: 128 << 10, max: 512 << 10},
	{min: 64 << 10, avg: 128 << 10, max: 256 << 10},
	defaultChunking,
	{min: 80 << 10, avg: 112 << 10, max: 224 << 10},
}

func (c chunking) String() string {
	return fmt.Sprintf("chunk=%d-%d-%dKiB", c.min>>10, c.avg>>10, c.max>>10)
}

// BenchmarkChange measures what armor build meets when one package of a large repository
// is updated: Build of 100,000 stanzas after one of them changed near the end or in the
// middle, with the cache and the digest state of the previous build. Each op changes the
// stanza afresh, so that its chunk is never in the cache. state=false removes the digest
// state before each op: Build then hashes the three whole files, which is what the caller
// did before Build returned the digests.
func BenchmarkChange(b *testing.B) {
	stanzas := benchStanzas[100_000]()
	dir := b.TempDir() // one cache for all cases: the cold build is slow
	for _, at := range []struct {
		name string
		i    int
	}{{"end", len(stanzas) - 10}, {"middle", len(stanzas) / 2}} {
		for _, state := range []bool{true, false} {
			b.Run(fmt.Sprintf("at=%s/state=%v", at.name, state), func(b *testing.B) {
				benchChange(b, stanzas, dir, at.i, state)
			})
		}
	}
}

// changes numbers the changed stanzas of BenchmarkChange across its cases and runs, so
// that no change finds its chunk in the shared cache.
var changes atomic.Int64

func benchChange(b *testing.B, stanzas [][]byte, dir string, at int, state bool) {
	const name = "dists/bench/main/binary-amd64/Packages"
	c, err := OpenCache(dir)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := Build(stanzas, c, name); err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(uint64(at), uint64(changes.Add(1))))
	changed := slices.Clone(stanzas)
	var ops, misses, digested int64
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime(b)
	for b.Loop() {
		ops++
		changed[at] = synthStanza(r, synthName(at), fmt.Sprintf("2.%d-1", changes.Add(1)))
		if !state {
			b.StopTimer()
			if err := os.Remove(filepath.Join(dir, stateName(name))); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
		c, err := OpenCache(dir)
		if err != nil {
			b.Fatal(err)
		}
		f, err := Build(changed, c, name)
		if err != nil {
			b.Fatal(err)
		}
		s := c.Stats()
		misses += s.Misses
		digested += s.Digested
		reportSizes(b, f)
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(ops), "ms/op")
	b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(ops)/1e6, "cpu-ms/op")
	b.ReportMetric(float64(misses)/float64(ops), "compressed-chunks/op")
	b.ReportMetric(float64(digested)/float64(ops)/1e6, "hashed-MB/op")
}

// BenchmarkColdAddOne10k measures what a CI runner that starts with an empty cache pays to
// build a 10,000-stanza index after adding one stanza at a random place: "cold" builds
// into the empty cache; "seeded" first seeds it from the published files of the parent
// index (Seed), so only the changed chunks are compressed; "warm" builds with the cache
// and digest state of the parent's build, the case of a runner that kept its cache. Each op
// adds a different stanza, so that its chunk is never in the cache.
func BenchmarkColdAddOne10k(b *testing.B) {
	const name = "dists/bench/main/binary-amd64/Packages"
	stanzas := benchStanzas[10_000]()
	parent, err := Build(stanzas, nil, name)
	if err != nil {
		b.Fatal(err)
	}
	for _, mode := range []string{"cold", "seeded", "warm"} {
		b.Run(mode, func(b *testing.B) {
			warmDir := b.TempDir()
			var warmState []byte
			if mode == "warm" {
				c, err := OpenCache(warmDir)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := Build(stanzas, c, name); err != nil {
					b.Fatal(err)
				}
				if warmState, err = os.ReadFile(filepath.Join(warmDir, stateName(name))); err != nil {
					b.Fatal(err)
				}
			}
			r := rand.New(rand.NewPCG(7, 1))
			var ops, misses, seeded int64
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := cpuTime(b)
			for b.Loop() {
				b.StopTimer()
				ops++
				at := 1 + r.IntN(len(stanzas)-1)
				changed := insertAt(stanzas, at, synthStanza(r, fmt.Sprintf("%s-x%d", synthName(at-1), ops), "1.0-1"))
				dir := warmDir
				if mode == "warm" {
					// The digest state of the parent's build, not of the last op's.
					if err := os.WriteFile(filepath.Join(dir, stateName(name)), warmState, 0o644); err != nil {
						b.Fatal(err)
					}
				} else {
					dir = b.TempDir()
				}
				b.StartTimer()
				c, err := OpenCache(dir)
				if err != nil {
					b.Fatal(err)
				}
				if mode == "seeded" {
					st, err := c.Seed(name, parent.Plain, parent.Gzip, parent.Xz)
					if err != nil {
						b.Fatal(err)
					}
					seeded += int64(st.Gzip.Seeded + st.XZ.Seeded)
				}
				if _, err := Build(changed, c, name); err != nil {
					b.Fatal(err)
				}
				misses += c.Stats().Misses
				if mode != "warm" {
					b.StopTimer()
					if err := os.RemoveAll(dir); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
			}
			b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(ops)/1e6, "cpu-ms/op")
			b.ReportMetric(float64(misses)/float64(ops), "compressed-chunks/op")
			b.ReportMetric(float64(seeded)/float64(ops), "seeded-entries/op")
		})
	}
}

// BenchmarkSeed10k measures Seed alone: a 10,000-stanza index's published files into an
// empty cache.
func BenchmarkSeed10k(b *testing.B) {
	const name = "dists/bench/main/binary-amd64/Packages"
	parent, err := Build(benchStanzas[10_000](), nil, name)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(parent.Plain)))
	for b.Loop() {
		b.StopTimer()
		dir := b.TempDir()
		b.StartTimer()
		c, err := OpenCache(dir)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := c.Seed(name, parent.Plain, parent.Gzip, parent.Xz); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if err := os.RemoveAll(dir); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}
