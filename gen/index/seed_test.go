package index

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/armor-apt/armor/gen/xz"

	kgzip "github.com/klauspost/compress/gzip"
)

// mustSeed seeds the cache in dir from the files of f, as cut by ck.
func mustSeed(t testing.TB, dir string, f *Files, ck chunking) SeedStats {
	t.Helper()
	st, err := openCache(t, dir).seed(testName, f.Plain, f.Gzip, f.Xz, ck)
	if err != nil {
		t.Fatalf("seed: %v", err)
	}
	checkSeedStats(t, st)
	return st
}

func checkSeedStats(t testing.TB, st SeedStats) {
	t.Helper()
	for _, n := range []SeedCounts{st.Gzip, st.XZ} {
		if n.Seeded < 0 || n.Present < 0 || n.Skipped < 0 || n.Seeded+n.Present+n.Skipped != st.Chunks {
			t.Fatalf("seed stats %+v do not add up", st)
		}
		if n.Why != nil && !errors.Is(n.Why, errSeed) {
			t.Errorf("seed stats: Why %v does not wrap errSeed", n.Why)
		}
	}
}

// chunkSums returns the SHA-256 of each chunk ck cuts stanzas into.
func chunkSums(t testing.TB, stanzas [][]byte, ck chunking) map[[32]byte][]byte {
	t.Helper()
	chunks, _ := layout(stanzas, ck.cut(stanzas, mustHashes(t, stanzas)))
	sums := make(map[[32]byte][]byte, len(chunks))
	for _, ch := range chunks {
		var p []byte
		for _, s := range stanzas[ch.first:ch.end] {
			p = append(append(p, s...), '\n')
		}
		sums[sha256.Sum256(p)] = p
	}
	return sums
}

// wantEntry is what a cache entry of a chunk holds: kind's form of plain[start:], where
// plain[:start] is the chunk before it (for the xz form; empty for the first chunk and for
// gzip).
type wantEntry struct {
	kind  string
	plain []byte
	start int
}

// chunkEntries returns the cache entries of the chunks of a build of stanzas cut by ck, by
// name.
func chunkEntries(t testing.TB, stanzas [][]byte, ck chunking) map[string]wantEntry {
	t.Helper()
	plains := chunkPlains(t, stanzas, ck)
	ents := make(map[string]wantEntry, 2*len(plains))
	var prev [32]byte
	var prevPlain []byte
	for _, p := range plains {
		sum := sha256.Sum256(p)
		ents[entryName(sum, kindGzip)] = wantEntry{kindGzip, p, 0}
		ents[entryName(xzKey(prev, sum), kindXZ)] = wantEntry{kindXZ, append(slices.Clone(prevPlain), p...), len(prevPlain)}
		prev, prevPlain = sum, p
	}
	return ents
}

// TestSeedThenBuild is the fresh runner: the cache starts empty, is seeded from the
// published files of the parent index, and the build of the changed index must compress
// only the chunks that changed and give the same bytes and digests as a build without any
// cache.
func TestSeedThenBuild(t *testing.T) {
	base := synthStanzas(600, 61)
	extra := synthStanzas(601, 62)[600]
	tests := []struct {
		name    string
		stanzas [][]byte
		ck      chunking
	}{
		{"insert first", insertAt(base, 0, extra), small},
		{"insert middle", insertAt(base, 300, extra), small},
		{"insert last", insertAt(base, len(base), extra), small},
		{"remove middle", slices.Delete(slices.Clone(base), 277, 278), small},
		{"replace middle", slices.Replace(slices.Clone(base), 450, 451, extra), small},
		{"unchanged", base, small},
		{"default chunking", insertAt(base, 200, extra), defaultChunking},
	}
	parents := map[chunking]*Files{}
	for _, tc := range tests {
		if parents[tc.ck] == nil {
			parents[tc.ck] = mustBuild(t, base, nil, tc.ck)
		}
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			parent := parents[tc.ck]
			dir := t.TempDir()
			st := mustSeed(t, dir, parent, tc.ck)
			chunks := len(chunkSums(t, base, tc.ck))
			want := SeedCounts{Seeded: chunks}
			if st.Chunks != chunks || st.Gzip != want || st.XZ != want {
				t.Fatalf("seed stats %+v, want %d chunks, each form all seeded", st, chunks)
			}

			c := openCache(t, dir)
			got := mustBuild(t, tc.stanzas, c, tc.ck)
			none := mustBuild(t, tc.stanzas, nil, tc.ck)
			sameFiles(t, got, none)
			// The changed chunks' gzip members are compressed afresh, and the xz form of
			// the changed chunks and of those after them.
			old := chunkEntries(t, base, tc.ck)
			changed, total := 0, 0
			for name := range chunkEntries(t, tc.stanzas, tc.ck) {
				total++
				if _, ok := old[name]; !ok {
					changed++
				}
			}
			if s := c.Stats(); s.Misses != int64(changed) || s.Hits != int64(total-changed) || s.Corrupt != 0 {
				t.Errorf("build stats %+v: want %d misses (the changed entries), %d hits", s, changed, total-changed)
			}
			if tc.name != "unchanged" && (changed < 2 || changed > 5) {
				t.Errorf("%d entries changed, want 2 to 5", changed)
			}
		})
	}
}

// TestSeedPublic seeds through the exported API, with the chunking Build uses.
func TestSeedPublic(t *testing.T) {
	base := synthStanzas(1500, 63)
	parent, err := Build(base, nil, testName)
	if err != nil {
		t.Fatal(err)
	}
	c := openCache(t, t.TempDir())
	st, err := c.Seed(testName, parent.Plain, parent.Gzip, parent.Xz)
	if err != nil {
		t.Fatal(err)
	}
	if st.Chunks < 3 || st.Gzip.Seeded != st.Chunks || st.XZ.Seeded != st.Chunks {
		t.Fatalf("seed stats %+v: want every chunk of both forms seeded", st)
	}
	again, err := c.Seed(testName, parent.Plain, parent.Gzip, parent.Xz)
	if err != nil {
		t.Fatal(err)
	}
	if again.Gzip.Present != st.Chunks || again.XZ.Present != st.Chunks {
		t.Errorf("second seed stats %+v: want every entry present", again)
	}
	buildFromCache(t, base, c, parent)
	if st, err := (*Cache)(nil).Seed(testName, parent.Plain, parent.Gzip, parent.Xz); err != nil || st != (SeedStats{}) {
		t.Errorf("nil cache: got %+v, %v; want nothing", st, err)
	}
}

func sameFiles(t testing.TB, got, want *Files) {
	t.Helper()
	sameBytes(t, "plain", got.Plain, want.Plain)
	sameBytes(t, "gzip", got.Gzip, want.Gzip)
	sameBytes(t, "xz", got.Xz, want.Xz)
	if got.Digests != want.Digests {
		t.Errorf("digests %+v, want %+v", got.Digests, want.Digests)
	}
}

// TestSeedSkipsWhatDoesNotMatch feeds Seed files that are not, or not all, the compressed
// forms Build writes of the plain index. Seed must store only entries that hold their
// chunk as this version compresses it, and the build after it must not change.
func TestSeedSkipsWhatDoesNotMatch(t *testing.T) {
	base := synthStanzas(300, 64)
	parent := mustBuild(t, base, nil, small)
	chunks := len(chunkSums(t, base, small))
	other := mustBuild(t, slices.Replace(slices.Clone(base), 150, 151, synthStanzas(301, 65)[300]), nil, small)
	one := mustBuild(t, base[:1], nil, small)
	otherCut := mustBuild(t, base, nil, chunking{min: 2 << 10, avg: 8 << 10, max: 32 << 10})
	flip := func(b []byte, at int) []byte { b = slices.Clone(b); b[at] ^= 0x40; return b }
	segs := xzSegmentsOf(t, parent, small)
	check := len(parent.Xz) - xz.HeaderSize - 12 - 1 // last byte of the block's check
	tests := []struct {
		name            string
		in              *Files // the files seeded; nil fields are parent's
		gzMin, gzMax    int    // range of gzip members seeded
		xzMin, xzMax    int
		gzWhy, xzWhy    string // part of Why, or "" for nil
		chunksOverride  int    // chunks the plain index cuts into, if not those of base
		buildFromSeeded bool   // build in.Plain's stanzas rather than base
	}{
		{name: "all good", in: &Files{}, gzMin: chunks, gzMax: chunks, xzMin: chunks, xzMax: chunks},
		{name: "gzip and xz swapped", in: &Files{Gzip: parent.Xz, Xz: parent.Gzip},
			gzWhy: "not a header Build writes", xzWhy: "no stream header"},
		{name: "truncated gzip", in: &Files{Gzip: parent.Gzip[:len(parent.Gzip)/2]},
			gzMin: 1, gzMax: chunks - 1, xzMin: chunks, xzMax: chunks, gzWhy: "member at offset"},
		{name: "gzip byte flipped in the middle", in: &Files{Gzip: flip(parent.Gzip, len(parent.Gzip)/2)},
			gzMin: 1, gzMax: chunks - 1, xzMin: chunks, xzMax: chunks, gzWhy: "member at offset"},
		{name: "gzip with trailing garbage", in: &Files{Gzip: append(slices.Clone(parent.Gzip), "junk"...)},
			gzMin: chunks, gzMax: chunks, xzMin: chunks, xzMax: chunks, gzWhy: "not a header Build writes"},
		{name: "gzip -9n of the whole index", in: &Files{Gzip: run(t, parent.Plain, "gzip", "-9n")},
			xzMin: chunks, xzMax: chunks, gzWhy: "does not end as Build's"},
		{name: "xz chunk byte flipped", in: &Files{Xz: flip(parent.Xz, segs[2]+40)},
			gzMin: chunks, gzMax: chunks, xzMin: chunks - 1, xzMax: chunks - 1, xzWhy: "LZMA2 data at offset"},
		{name: "xz chunk's last byte flipped", in: &Files{Xz: flip(parent.Xz, segs[3]-1)},
			gzMin: chunks, gzMax: chunks, xzMin: chunks - 1, xzMax: chunks - 1, xzWhy: "LZMA2 data at offset"},
		{name: "xz block check flipped", in: &Files{Xz: flip(parent.Xz, check)},
			gzMin: chunks, gzMax: chunks, xzWhy: "check of the plain index"},
		{name: "xz block header flipped", in: &Files{Xz: flip(parent.Xz, xz.HeaderSize+4)},
			gzMin: chunks, gzMax: chunks, xzWhy: "block header"},
		{name: "xz index flipped", in: &Files{Xz: flip(parent.Xz, len(parent.Xz)-xz.HeaderSize-6)},
			gzMin: chunks, gzMax: chunks, xzWhy: "index"},
		{name: "truncated xz", in: &Files{Xz: parent.Xz[:len(parent.Xz)-1]},
			gzMin: chunks, gzMax: chunks, xzWhy: "not an xz stream"},
		{name: "xz -9 of the whole index", in: &Files{Xz: run(t, parent.Plain, "xz", "-9", "-c")},
			gzMin: chunks, gzMax: chunks, xzWhy: "stream header"},
		{name: "xz -9 --check=crc32 of the whole index", in: &Files{Xz: run(t, parent.Plain, "xz", "-9", "-c", "--check=crc32")},
			gzMin: chunks, gzMax: chunks, xzWhy: "block header"},
		{name: "plain of another index", in: &Files{Plain: other.Plain},
			// The compressed files hold the chunks of base: the gzip members before the
			// change are seeded (after it, the offsets in the plain index differ). The xz
			// block's size or check is not the plain index's: none of it is.
			gzMin: 1, gzMax: chunks - 1,
			gzWhy: "other bytes", xzWhy: "plain index", buildFromSeeded: true},
		{name: "cut by another chunking", in: &Files{Gzip: otherCut.Gzip, Xz: otherCut.Xz},
			gzMax: chunks / 2, gzWhy: "no member or LZMA2 data", xzWhy: "block header"},
		{name: "plain not an index", in: &Files{Plain: []byte("Package: a\n")},
			gzWhy: "not a list of stanzas", xzWhy: "not a list of stanzas", chunksOverride: -1},
		{name: "empty files", in: &Files{Plain: []byte{}, Gzip: []byte{}, Xz: []byte{}}, chunksOverride: -1},
		{name: "standard library's gzip", in: &Files{Gzip: regzipStdlib(t, base, small)},
			xzMin: chunks, xzMax: chunks, gzWhy: "does not end as Build's"},
		{name: "another gzip level", in: &Files{Gzip: regzipLevel(t, base, small, 4)},
			xzMin: chunks, xzMax: chunks, gzWhy: "another compressor"},
		{name: "xz chunks matching two chunks back", in: &Files{Xz: rexzTwoBack(t, base, small)},
			gzMin: chunks, gzMax: chunks, xzMax: chunks - 1, xzWhy: "LZMA2 data at offset"},
		{name: "another xz compressor", in: &Files{Xz: rexzOtherSettings(t, base, small)},
			gzMin: chunks, gzMax: chunks, xzWhy: "another compressor"},
		{name: "one chunk, gzip -9n", in: &Files{Plain: one.Plain, Gzip: run(t, one.Plain, "gzip", "-9n"), Xz: one.Xz},
			xzMin: 1, xzMax: 1, gzWhy: "does not end as Build's", chunksOverride: 1, buildFromSeeded: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := *tc.in
			for _, p := range []struct{ dst, src *[]byte }{{&in.Plain, &parent.Plain}, {&in.Gzip, &parent.Gzip}, {&in.Xz, &parent.Xz}} {
				if *p.dst == nil {
					*p.dst = *p.src
				}
			}
			dir := t.TempDir()
			st := mustSeed(t, dir, &in, small)
			wantChunks := chunks
			if tc.chunksOverride != 0 {
				wantChunks = max(tc.chunksOverride, 0)
			}
			if tc.buildFromSeeded && tc.chunksOverride == 0 {
				wantChunks = len(chunkSums(t, splitStanzas(t, in.Plain), small))
			}
			if st.Chunks != wantChunks {
				t.Errorf("seed stats %+v: want %d chunks", st, wantChunks)
			}
			for _, f := range []struct {
				name     string
				n        SeedCounts
				min, max int
				why      string
			}{{"gzip", st.Gzip, tc.gzMin, tc.gzMax, tc.gzWhy}, {"xz", st.XZ, tc.xzMin, tc.xzMax, tc.xzWhy}} {
				if f.n.Seeded < f.min || f.n.Seeded > f.max {
					t.Errorf("%s: %d seeded (%+v), want %d to %d", f.name, f.n.Seeded, f.n, f.min, f.max)
				}
				switch {
				case f.why == "" && f.n.Why != nil:
					t.Errorf("%s: Why %v, want none", f.name, f.n.Why)
				case f.why != "" && (f.n.Why == nil || !strings.Contains(f.n.Why.Error(), f.why)):
					t.Errorf("%s: Why %v, want one saying %q", f.name, f.n.Why, f.why)
				}
			}
			stanzas := base
			if tc.buildFromSeeded {
				stanzas = splitStanzas(t, in.Plain)
			}
			checkEntries(t, dir, chunkEntries(t, stanzas, small), true)
			want := parent
			if tc.buildFromSeeded {
				want = mustBuild(t, stanzas, nil, small)
			}
			c := openCache(t, dir)
			sameFiles(t, mustBuild(t, stanzas, c, small), want)
			if s := c.Stats(); s.Hits != int64(st.Gzip.Seeded+st.XZ.Seeded) || s.Corrupt != 0 {
				t.Errorf("build stats %+v: want a hit for each of the %d entries seeded", s, st.Gzip.Seeded+st.XZ.Seeded)
			}
		})
	}
}

// TestSeedRejectsFlippedBits flips, one at a time, bits of every byte of a gzip member and
// of xz blocks: none of the damaged members or blocks may be seeded, even those whose
// damage the decoders do not notice (a padding bit, a chunk size inside LZMA2 data).
func TestSeedRejectsFlippedBits(t *testing.T) {
	base := synthStanzas(300, 67)
	parent := mustBuild(t, base, nil, small)
	plains := chunkPlains(t, base, small)
	cut := &seeder{c: openCache(t, t.TempDir()), ck: small, plain: parent.Plain}
	if err := cut.cut(); err != nil {
		t.Fatal(err)
	}
	gzEnd := len(compressGzipMust(t, plains[0]))
	for i := range gzEnd {
		for _, m := range []byte{0x01, 0x40, 0x80} {
			b := slices.Clone(parent.Gzip[:gzEnd])
			b[i] ^= m
			s := &seeder{c: cut.c, ck: small, plain: parent.Plain, chunks: cut.chunks,
				gz: seedForm{kind: kindGzip, file: "gz", present: cut.gz.present}}
			s.walkGzip(b)
			if len(s.gz.found) != 0 {
				t.Errorf("gzip member with byte %d of %d flipped by %#x: seeded", i, gzEnd, m)
			}
		}
	}
	// Flip bits in the first three chunks' LZMA2 data (headers included) of the whole file,
	// and seed from it: every entry found must be the original bytes of its chunk, or be
	// rejected by the decoding check.
	segs := xzSegmentsOf(t, parent, small)
	orig := map[int][]byte{}
	for k := range len(segs) - 1 {
		orig[k] = parent.Xz[segs[k]:segs[k+1]]
	}
	for i := segs[0]; i < segs[3]; i++ {
		for _, m := range []byte{0x01, 0x40, 0x80} {
			b := slices.Clone(parent.Xz)
			b[i] ^= m
			s := &seeder{c: cut.c, ck: small, plain: parent.Plain, chunks: cut.chunks, decodeXZ: true,
				xz: seedForm{kind: kindXZ, file: "xz", present: cut.xz.present}}
			s.findSegments(b)
			s.xz.ok = make([]bool, len(s.xz.found))
			for j, e := range s.xz.found {
				if bytes.Equal(e.payload, orig[e.chunk]) {
					continue
				}
				if s.checkSegment(j); s.xz.ok[j] {
					t.Errorf("xz file with byte %d flipped by %#x: chunk %d's damaged LZMA2 data accepted", i, m, e.chunk)
				}
			}
		}
	}
}

func compressGzipMust(t testing.TB, plain []byte) []byte {
	t.Helper()
	b, err := compressGzipMember(plain)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func splitStanzas(t testing.TB, plain []byte) [][]byte {
	t.Helper()
	s, ok := splitPlain(plain)
	if !ok {
		t.Fatalf("not an index: %q", plain)
	}
	return s
}

// xzSegmentsOf returns the offset in f.Xz of each chunk's LZMA2 data, and of the end
// marker after them; f was built with ck.
func xzSegmentsOf(t testing.TB, f *Files, ck chunking) []int {
	t.Helper()
	stanzas := splitStanzas(t, f.Plain)
	chunks, total := layout(stanzas, ck.cut(stanzas, mustHashes(t, stanzas)))
	lz, off, err := xz.ParseStream(f.Xz, xzHeadOf(chunks, total, ck), f.Plain)
	if err != nil {
		t.Fatal(err)
	}
	segs, err := xz.SplitLZMA2(lz)
	if err != nil {
		t.Fatal(err)
	}
	var offs []int
	for _, sg := range segs {
		offs = append(offs, off+sg.Start)
	}
	return append(offs, off+len(lz))
}

// regzipStdlib compresses each chunk with the standard library's gzip at level 9, with the
// header Build writes: another compressor, same container.
func regzipStdlib(t testing.TB, stanzas [][]byte, ck chunking) []byte {
	t.Helper()
	var out bytes.Buffer
	for _, p := range chunkPlains(t, stanzas, ck) {
		w, err := gzip.NewWriterLevel(&out, gzip.BestCompression)
		if err != nil {
			t.Fatal(err)
		}
		w.ModTime, w.OS = time.Unix(0, 0), 3
		w.Write(p)
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return out.Bytes()
}

// regzipLevel compresses each chunk as Build does but at another level, with the header
// of level 9: another compressor in Build's container, down to the empty final block.
func regzipLevel(t testing.TB, stanzas [][]byte, ck chunking, level int) []byte {
	t.Helper()
	var out bytes.Buffer
	for _, p := range chunkPlains(t, stanzas, ck) {
		w, err := kgzip.NewWriterLevel(&out, level)
		if err != nil {
			t.Fatal(err)
		}
		w.ModTime, w.OS = time.Unix(0, 0), 3
		start := out.Len()
		w.Write(p)
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		out.Bytes()[start+8] = 2 // XFL of level 9
	}
	return out.Bytes()
}

// rexzOtherSettings compresses each chunk as Build does but with another match finder
// depth and nice length, into the stream Build writes: another compressor, same container.
func rexzOtherSettings(t testing.TB, stanzas [][]byte, ck chunking) []byte {
	t.Helper()
	f := mustBuild(t, stanzas, nil, ck)
	chunks, total := layout(stanzas, ck.cut(stanzas, mustHashes(t, stanzas)))
	out := xzHeadOf(chunks, total, ck)
	hdr := len(out) - xz.HeaderSize
	for _, ch := range chunks {
		out = append(out, xz.EncodeLZMA2(f.Plain[ch.prevOff:ch.off+ch.size], ch.off-ch.prevOff, xz.Effort{Depth: 4, Nice: 8})...)
	}
	return finishXZ(out, hdr, len(f.Plain), crc32.ChecksumIEEE(f.Plain))
}

// rexzTwoBack compresses each chunk as Build does but after the two chunks before it, into
// the stream Build writes: a valid xz file whose chunks' data depends on more than the
// chunk before, which Seed must not store as entries of (previous chunk, chunk).
func rexzTwoBack(t testing.TB, stanzas [][]byte, ck chunking) []byte {
	t.Helper()
	f := mustBuild(t, stanzas, nil, ck)
	chunks, total := layout(stanzas, ck.cut(stanzas, mustHashes(t, stanzas)))
	out := xzHeadOf(chunks, total, ck)
	hdr := len(out) - xz.HeaderSize
	for i, ch := range chunks {
		from := ch.prevOff
		if i > 1 {
			from = chunks[i-2].off
		}
		out = append(out, xz.EncodeLZMA2(f.Plain[from:ch.off+ch.size], ch.off-from, xz.DefaultEffort)...)
	}
	out = finishXZ(out, hdr, len(f.Plain), crc32.ChecksumIEEE(f.Plain))
	sameBytes(t, "xz -dc of two-back chunks", run(t, out, "xz", "-dc"), f.Plain)
	return out
}

func chunkPlains(t testing.TB, stanzas [][]byte, ck chunking) [][]byte {
	t.Helper()
	chunks, _ := layout(stanzas, ck.cut(stanzas, mustHashes(t, stanzas)))
	var out [][]byte
	for _, ch := range chunks {
		var p []byte
		for _, s := range stanzas[ch.first:ch.end] {
			p = append(append(p, s...), '\n')
		}
		out = append(out, p)
	}
	return out
}

// checkEntries checks every chunk entry in dir: it must be intact, be one of want, and
// decompress to its chunk with the aux value Build records. When strict, it must also be
// byte for byte what this version compresses the chunk to.
func checkEntries(t testing.TB, dir string, want map[string]wantEntry, strict bool) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		name := e.Name()
		hexSum, kind, _ := strings.Cut(name, ".")
		if kind != kindGzip && kind != kindXZ {
			continue
		}
		var sum [32]byte
		if n, err := hex.Decode(sum[:], []byte(hexSum)); err != nil || n != len(sum) {
			t.Fatalf("entry %s: not named by a SHA-256 (%v)", name, err)
		}
		w, ok := want[name]
		if !ok {
			t.Errorf("entry %s: no such chunk", name)
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if len(b) < trailerSize {
			t.Errorf("entry %s: %d bytes", name, len(b))
			continue
		}
		payload := b[:len(b)-trailerSize]
		aux, ok := checkTrailer(name, payload, b[len(b)-trailerSize:])
		if !ok || aux != uint64(len(w.plain)-w.start) {
			t.Errorf("entry %s: bad trailer (aux %d)", name, aux)
			continue
		}
		if kind == kindGzip {
			sameBytes(t, name+" gunzipped", gunzipGo(t, payload), w.plain)
		} else if err := xz.CheckLZMA2(payload, w.plain, w.start); err != nil {
			t.Errorf("entry %s: %v", name, err)
		}
		if strict {
			fm := form{kind: kind}
			if err := compressForm(&fm, w.plain, w.start, nil); err != nil {
				t.Fatal(err)
			}
			sameBytes(t, name+" against compressing afresh", payload, fm.data)
		}
	}
}

// FuzzSeed seeds a cache from arbitrary gzip and xz files beside a fixed plain index. Seed
// must never fail or panic, must store only entries that decompress to their chunk, and
// the build after it must write the index right.
func FuzzSeed(f *testing.F) {
	tiny := chunking{min: 1 << 9, avg: 2 << 10, max: 4 << 10}
	stanzas := synthStanzas(8, 66) // small, so that each run and each minimization is quick
	parent, err := build(stanzas, nil, "", tiny, nil)
	if err != nil {
		f.Fatal(err)
	}
	ents := chunkEntries(f, stanzas, tiny)
	f.Add(parent.Gzip, parent.Xz)
	f.Add(parent.Gzip[:len(parent.Gzip)/2], parent.Xz[:len(parent.Xz)-4])
	f.Add(parent.Xz, parent.Gzip)
	f.Add([]byte{}, []byte{})
	f.Add(gzipHeader(), xz.StreamHeader())
	f.Add(append(slices.Clone(parent.Gzip), parent.Gzip...), append(xz.StreamHeader(), xz.IndexAndFooter([]xz.Block{{Unpadded: 1 << 62}})...))
	huge := binary.AppendUvarint(append(xz.StreamHeader(), 0), 1<<62)
	f.Add(parent.Gzip, append(huge, make([]byte, 12)...))
	f.Fuzz(func(t *testing.T, gz, xz []byte) {
		dir := t.TempDir()
		c := openCache(t, dir)
		st, err := c.seed("fuzz", parent.Plain, gz, xz, tiny)
		if err != nil {
			t.Fatalf("seed: %v", err)
		}
		checkSeedStats(t, st)
		checkEntries(t, dir, ents, false)
		if st.Gzip.Seeded+st.XZ.Seeded == 0 {
			return
		}
		got, err := build(stanzas, openCache(t, dir), "fuzz", tiny, nil)
		if err != nil {
			t.Fatalf("build: %v", err)
		}
		sameBytes(t, "gzip", gunzipGo(t, got.Gzip), parent.Plain)
		sameBytes(t, "xz", unxzGo(t, got.Xz), parent.Plain)
		checkDigests(t, got)
	})
}

// TestSeedReportsWriteFailure checks that a cache entry Seed cannot write is an error, and
// is not counted as seeded.
func TestSeedReportsWriteFailure(t *testing.T) {
	base := synthStanzas(100, 68)
	parent := mustBuild(t, base, nil, small)
	dir := t.TempDir()
	var blocked [32]byte
	for sum := range chunkSums(t, base, small) {
		blocked = sum
		break
	}
	// A directory where the entry should go: renaming the written entry onto it fails.
	if err := os.Mkdir(filepath.Join(dir, entryName(blocked, kindGzip)), 0o755); err != nil {
		t.Fatal(err)
	}
	st, err := openCache(t, dir).seed(testName, parent.Plain, parent.Gzip, parent.Xz, small)
	if err == nil || !strings.Contains(err.Error(), entryName(blocked, kindGzip)) {
		t.Errorf("seed: got error %v, want one naming entry %s", err, entryName(blocked, kindGzip))
	}
	checkSeedStats(t, st)
	if st.Gzip.Seeded != st.Chunks-1 || st.Gzip.Skipped != 1 || st.XZ.Seeded != st.Chunks {
		t.Errorf("seed stats %+v: want all but the blocked entry seeded", st)
	}
}

// buildFromCache builds stanzas with c and checks that the result is want's bytes and that
// the cache held every compressed chunk.
func buildFromCache(t *testing.T, stanzas [][]byte, c *Cache, want *Files) {
	t.Helper()
	got, err := Build(stanzas, c, testName)
	if err != nil {
		t.Fatal(err)
	}
	sameFiles(t, got, want)
	if s := c.Stats(); s.Misses != 0 {
		t.Errorf("build stats %+v: want no compression", s)
	}
}
