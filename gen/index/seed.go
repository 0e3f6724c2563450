package index

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/armor-apt/armor/gen/xz"
	"github.com/klauspost/compress/gzip"
)

// SeedStats says what Seed took from the published files of one index.
type SeedStats struct {
	// Chunks is the number of chunks Build cuts the plain index into.
	Chunks int
	// Gzip and XZ count the chunks of each compressed form.
	Gzip, XZ SeedCounts
}

// SeedCounts counts the chunks of one compressed form: Seeded+Present+Skipped = Chunks.
type SeedCounts struct {
	Seeded  int   // entries stored from the published file, each checked against its chunk
	Present int   // entries the cache already held; Seed leaves them as they are
	Skipped int   // chunks left without an entry: their next Build compresses them
	Why     error // the first problem found in the file (or in the plain index); nil if none
}

// errSeed wraps every reason Seed skips a chunk or a file.
var errSeed = errors.New("not seeded")

// Seed fills c with the compressed chunks of an index that is already published, so that
// a Build of the same index after a small change compresses only the chunks that changed,
// on a runner whose cache starts empty. plain, gz and xz are the three forms of the index
// (Files.Plain, Files.Gzip, Files.Xz of the build that published it, as fetched from the
// store); name is the index path as Build receives it, and names the files in
// SeedCounts.Why.
//
// Seed cuts plain into chunks as Build does, splits gz into its gzip members and the one
// block of xz into each chunk's LZMA2 data (at its state resets, reading the LZMA2 chunk
// headers), and stores a member or a chunk's LZMA2 data as the entry of a chunk only when
// it holds exactly that chunk: the gzip header is the one Build writes and the member
// decompresses to the chunk's bytes, checksum included; the xz stream's headers, block
// end (with the CRC32 of plain), index and footer are byte for byte Build's for plain, and
// the LZMA2 data decodes to the chunk with only the chunk before it in the dictionary, as
// Build compresses it, so that it is the entry a warm cache would hold under the same key
// (xzKey of the two chunks). Bytes that do not decompress to their chunk are never
// stored (SeedPublished leaves that to the release for the xz data of a signed one: its
// framing is still checked). So that Build's output stays the same with or without Seed,
// one stored chunk of each form (the smallest full-size one) is also compressed afresh and must come out byte for byte
// as published; if it does not, the file was made by another compressor or version and
// nothing of that form is stored. A compressor change that alters some chunks but leaves
// that one as it was goes unnoticed: whoever changes the cache's entry kinds for such a
// change must also keep files published before it from being seeded (for example by
// recording the kinds beside the published files).
//
// Files that do not match (written by another tool, cut differently, damaged, or not the
// three forms of one index) only mean fewer entries: Seed stores the chunks it could
// check and reports the rest in the stats, never as an error. The error it returns is a
// failure to write the cache, which the next Build would meet too. Seeding is useful only
// when the next Build's stanzas are, apart from the change, the published ones byte for
// byte, since entries are keyed by the chunks' plain bytes.
//
// Seed does not record the digest state of the published index (the hash states at its
// chunk boundaries): that would hash the three whole files, which is what the next Build
// does when it finds no state, so it would save nothing. Build records the state it
// computes for the builds after it. A nil c seeds nothing. Seed may run concurrently with
// Builds and other Seeds on the same cache.
func (c *Cache) Seed(name string, plain, gz, xz []byte) (SeedStats, error) {
	return c.seed(name, plain, gz, xz, defaultChunking)
}

// Published is an index as a fresh runner has it: the compressed forms fetched from the
// store, and the plain index made of Gzip by Gunzip.
type Published struct {
	Plain, Gzip, Xz []byte
	// GzipMembers are where Gunzip found Gzip's members, each of which decoded to its
	// bytes of Plain: they are not decoded again. Without them, Gzip is decoded as by Seed.
	GzipMembers []GzipMember
	// Signed says that the three forms are those a signed release lists, each checked
	// against its SHA-256 there: the xz blocks are then not decoded, since the release
	// vouches that Xz decompresses to Plain (apt checks the same). Every other check of
	// Seed applies: a block is taken for a chunk only at the chunk's place in the stream,
	// with the header, padding and CRC-64 check of the chunk's bytes that Build writes,
	// and LZMA2 chunk headers that tile it and declare the chunk's size.
	Signed bool
	// Background says to keep the entries in memory, where a Build on the same Cache
	// finds them at once, and to write them to disk on a goroutine of their own, which
	// Cache.Wait waits for: creating a file per entry is kernel time the build need not
	// wait for (hundreds of entries at 100,000 packages). The payloads
	// are slices of Gzip and Xz, which must then stay unchanged until Wait returns.
	Background bool
}

// SeedPublished is Seed for an index a fresh runner fetched: it decodes no gzip member
// again, and no xz block of a signed release. Decoding every block was most of a fresh
// runner's work at 100,000 packages.
func (c *Cache) SeedPublished(name string, p Published) (SeedStats, error) {
	return c.seedOpts(name, p.Plain, p.Gzip, p.GzipMembers, p.Xz, !p.Signed, p.Background, defaultChunking)
}

// seedEntry is a compressed form of a chunk found in a published file.
type seedEntry struct {
	kind    string // entry kind: kindGzip or kindXZ
	chunk   int    // index into seeder.chunks
	payload []byte // the member or LZMA2 data, a slice of the published file
	aux     uint64 // as the cache entry records it
	off     int    // offset in the published file, for messages
}

// seedForm is what Seed finds of one compressed form.
type seedForm struct {
	kind    string
	file    string // name of the published file, for messages
	present []bool // per chunk: the cache holds an entry
	found   []seedEntry
	ok      []bool // per found entry: it decompresses to its chunk

	mu  sync.Mutex // guards why: chunks are checked in parallel
	why error
}

// fail records the first problem found in the file of f.
func (f *seedForm) fail(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.why == nil {
		f.why = fmt.Errorf("%s: %w: "+format, append([]any{f.file, errSeed}, args...)...)
	}
}

type seeder struct {
	c      *Cache
	ck     chunking
	plain  []byte
	chunks []chunk
	gz, xz seedForm
	// decodeXZ: check that each xz block decodes to its chunk (see Published.Signed).
	decodeXZ bool
}

func (c *Cache) seed(name string, plain, gz, xz []byte, ck chunking) (SeedStats, error) {
	return c.seedOpts(name, plain, gz, nil, xz, true, false, ck)
}

// seedOpts seeds c; members, when not nil, are gz's members as Gunzip found them,
// decodeXZ says whether xz blocks are decoded, and background whether the entries are
// written in the background (see Published.Background).
func (c *Cache) seedOpts(name string, plain, gz []byte, members []GzipMember, xz []byte, decodeXZ, background bool, ck chunking) (SeedStats, error) {
	if c == nil {
		return SeedStats{}, nil
	}
	s := &seeder{c: c, ck: ck, plain: plain, decodeXZ: decodeXZ,
		gz: seedForm{kind: kindGzip, file: name + ".gz"},
		xz: seedForm{kind: kindXZ, file: name + ".xz"}}
	if err := s.cut(); err != nil {
		s.gz.fail("%v", err)
		s.xz.fail("%v", err)
		return s.stats(), nil
	}
	var jobs []func()
	if s.todo(&s.gz) {
		if members != nil {
			s.takeMembers(gz, members) // decoded already: no job
		} else {
			jobs = append(jobs, func() { s.walkGzip(gz) })
		}
	}
	if s.todo(&s.xz) {
		s.findSegments(xz)
		s.xz.ok = make([]bool, len(s.xz.found))
		for i := range s.xz.found {
			jobs = append(jobs, func() { s.checkSegment(i) })
		}
	}
	_ = parallel(len(jobs), func(i int) error { jobs[i](); return nil })

	type put struct {
		f *seedForm
		i int // index into f.found
	}
	var puts []put
	for _, f := range []*seedForm{&s.gz, &s.xz} {
		s.sample(f)
		for i := range f.found {
			if f.ok[i] {
				puts = append(puts, put{f, i})
			}
		}
	}
	if background {
		names, entries := make([]string, len(puts)), make([]heldEntry, len(puts))
		_ = parallel(len(puts), func(i int) error {
			e := puts[i].f.found[puts[i].i]
			names[i] = entryName(s.key(e), e.kind)
			t := entryTrailer(names[i], e.payload, e.aux)
			entries[i] = heldEntry{payload: e.payload, meta: meta{aux: e.aux, crc: binary.LittleEndian.Uint32(t[8:])}}
			return nil
		})
		c.hold(names, entries)
		return s.stats(), nil
	}
	err := parallel(len(puts), func(i int) error {
		f, k := puts[i].f, puts[i].i
		e := f.found[k]
		if _, err := c.put(entryName(s.key(e), e.kind), e.payload, e.aux); err != nil {
			f.ok[k] = false // not stored: counted as skipped
			return err
		}
		return nil
	})
	if err != nil {
		return s.stats(), fmt.Errorf("seed index cache from %s: %w", name, err)
	}
	return s.stats(), nil
}

// cut splits the plain index into its stanzas and chunks, as Build cut it, hashes each chunk
// and notes which entries the cache already holds.
func (s *seeder) cut() error {
	stanzas, ok := splitPlain(s.plain)
	if !ok {
		return errors.New("the plain index is not a list of stanzas each followed by a blank line")
	}
	hashes, err := hashStanzas(stanzas)
	if err != nil {
		return err
	}
	s.chunks, _ = layout(stanzas, s.ck.cut(stanzas, hashes))
	s.gz.present = make([]bool, len(s.chunks))
	s.xz.present = make([]bool, len(s.chunks))
	if err := parallel(len(s.chunks), func(i int) error {
		ch := &s.chunks[i]
		ch.sum = sha256.Sum256(s.plain[ch.off : ch.off+ch.size])
		ch.gz.key = ch.sum
		_, s.gz.present[i] = s.c.size(entryName(ch.gz.key, kindGzip))
		return nil
	}); err != nil {
		return err
	}
	return parallel(len(s.chunks), func(i int) error {
		keyXZ(s.chunks, i, s.c)
		s.xz.present[i] = s.chunks[i].xz.cached
		return nil
	})
}

// key returns the cache key of the entry e.
func (s *seeder) key(e seedEntry) [32]byte {
	if e.kind == kindXZ {
		return s.chunks[e.chunk].xz.key
	}
	return s.chunks[e.chunk].gz.key
}

// splitPlain returns the stanzas of a plain index (each with its final newline, without the
// blank line after it). ok is false unless plain is a sequence of such stanzas; whether
// each is a well-formed one is for checkStanza to say.
func splitPlain(plain []byte) (stanzas [][]byte, ok bool) {
	for len(plain) > 0 {
		i := bytes.Index(plain, []byte("\n\n"))
		if i < 0 {
			return nil, false
		}
		stanzas = append(stanzas, plain[:i+1:i+1])
		plain = plain[i+2:]
	}
	return stanzas, true
}

// todo reports whether some chunk lacks an entry of form f.
func (s *seeder) todo(f *seedForm) bool {
	for _, p := range f.present {
		if !p {
			return true
		}
	}
	return false
}

// chunkAt returns the chunk that starts at plain offset off and is size bytes long.
func (s *seeder) chunkAt(off, size int) (int, bool) {
	lo, hi := 0, len(s.chunks)
	for lo < hi {
		m := (lo + hi) / 2
		if s.chunks[m].off < off {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < len(s.chunks) && s.chunks[lo].off == off && s.chunks[lo].size == size {
		return lo, true
	}
	return 0, false
}

// gzipHeader is the header Build gives every member (gzip -n style, level 9).
var gzipHeader = sync.OnceValue(func() []byte {
	b, err := compressGzipMember(nil)
	if err != nil {
		panic(err) // compressing nothing into memory cannot fail
	}
	return b[:10]
})

// walkGzip decodes the gzip members of gz one after the other, each checked against the
// plain index at the offset the members before it reach, and keeps those that hold exactly
// one chunk. It stops at the first member that is not Build's, does not decode or does not
// match the plain index, since the next one cannot be found without decoding this one.
func (s *seeder) walkGzip(gz []byte) {
	f := &s.gz
	br := bytes.NewReader(gz)
	var zr gzip.Reader
	buf := make([]byte, 64<<10)
	pos := 0 // offset in s.plain of the next member's content
	for br.Len() > 0 {
		start := len(gz) - br.Len()
		if !bytes.HasPrefix(gz[start:], gzipHeader()) {
			f.fail("member at offset %d: not a header Build writes", start)
			break
		}
		if err := zr.Reset(br); err != nil {
			f.fail("member at offset %d: %v", start, err)
			break
		}
		zr.Multistream(false) // stop after this member, br just after its trailer
		n, err := readSame(&zr, s.plain[pos:], buf)
		if err != nil {
			f.fail("member at offset %d (plain offset %d): %v", start, pos, err)
			break
		}
		end := len(gz) - br.Len()
		if gz[end-9] != 0 {
			// Build's deflate data ends with an empty final block and zero padding: a
			// damaged padding bit would pass unnoticed by the decoder.
			f.fail("member at offset %d: deflate data does not end as Build's does", start)
			break
		}
		if i, ok := s.chunkAt(pos, n); ok && !f.present[i] {
			f.found = append(f.found, seedEntry{kind: kindGzip, chunk: i, payload: gz[start:end:end], aux: uint64(n), off: start})
		}
		pos += n
	}
	f.ok = make([]bool, len(f.found))
	for i := range f.ok {
		f.ok[i] = true
	}
}

// takeMembers is walkGzip for members that Gunzip found and decoded into s.plain: it
// checks each as walkGzip does, but for its decoding, which Gunzip did.
func (s *seeder) takeMembers(gz []byte, members []GzipMember) {
	f := &s.gz
	pos := 0
	for _, m := range members {
		start, end := m.Off, m.Off+m.Size
		if start < 0 || m.Size < 18 || end > len(gz) || m.PlainOff != pos || m.PlainSize < 0 || pos+m.PlainSize > len(s.plain) {
			f.fail("member at offset %d: not where Gunzip found a member of this index", start)
			break
		}
		if !bytes.HasPrefix(gz[start:], gzipHeader()) {
			f.fail("member at offset %d: not a header Build writes", start)
			break
		}
		if gz[end-9] != 0 {
			// As in walkGzip: Build's deflate data ends with an empty final block and zero
			// padding.
			f.fail("member at offset %d: deflate data does not end as Build's does", start)
			break
		}
		if i, ok := s.chunkAt(pos, m.PlainSize); ok && !f.present[i] {
			f.found = append(f.found, seedEntry{kind: kindGzip, chunk: i, payload: gz[start:end:end], aux: uint64(m.PlainSize), off: start})
		}
		pos += m.PlainSize
	}
	f.ok = make([]bool, len(f.found))
	for i := range f.ok {
		f.ok[i] = true
	}
}

// readSame reads r to its end, checking that it yields a prefix of want, and returns how
// many bytes it yielded. It never reads more than one buffer past the end of want.
func readSame(r io.Reader, want, buf []byte) (int, error) {
	n := 0
	for {
		m, err := r.Read(buf)
		if m > len(want)-n {
			return n, fmt.Errorf("decompresses to more than the plain index holds")
		}
		if !bytes.Equal(buf[:m], want[n:n+m]) {
			return n, errors.New("decompresses to other bytes than the plain index")
		}
		n += m
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

// findSegments lists the chunks' LZMA2 data in the block of the xz stream that hold
// exactly one chunk lacking its entry. The stream must be laid out as Build writes it:
// its headers, the end of its block, its index and footer byte for byte as Build would
// write them for the plain index, and its LZMA2 data cut into chunks as xz.SplitLZMA2 says.
func (s *seeder) findSegments(b []byte) {
	f := &s.xz
	lz, off, err := xz.ParseStream(b, xzHeadOf(s.chunks, len(s.plain), s.ck), s.plain)
	if err != nil {
		f.fail("%v", err)
		return
	}
	segs, err := xz.SplitLZMA2(lz)
	if err != nil {
		f.fail("%v", err)
		return
	}
	pos := 0
	for _, sg := range segs {
		if sg.Size > len(s.plain)-pos {
			f.fail("LZMA2 chunks hold more than the plain index's %d bytes", len(s.plain))
			return
		}
		if i, ok := s.chunkAt(pos, sg.Size); ok && !f.present[i] {
			f.found = append(f.found, seedEntry{kind: kindXZ, chunk: i, payload: lz[sg.Start:sg.End:sg.End],
				aux: uint64(sg.Size), off: off + sg.Start})
		}
		pos += sg.Size
	}
	if pos != len(s.plain) {
		f.fail("LZMA2 chunks hold %d bytes, the plain index %d", pos, len(s.plain))
	}
}

// checkSegment checks that the i-th chunk's LZMA2 data found decodes to its chunk with
// only the chunk before it in the dictionary, as Build compresses it.
func (s *seeder) checkSegment(i int) {
	e := s.xz.found[i]
	ch := &s.chunks[e.chunk]
	if !s.decodeXZ {
		// A signed release's file (see Published.Signed): its framing was checked by
		// findSegments, and sample compresses one chunk afresh.
		s.xz.ok[i] = true
		return
	}
	if err := xz.CheckLZMA2(e.payload, s.plain[ch.prevOff:ch.off+ch.size], ch.off-ch.prevOff); err != nil {
		s.xz.fail("LZMA2 data at offset %d: %v", e.off, err)
		return
	}
	s.xz.ok[i] = true
}

// sample compresses afresh one chunk of the entries of f found intact, and drops them all
// unless it comes out as published: Build's output must not depend on whether the cache
// was seeded.
func (s *seeder) sample(f *seedForm) {
	pick := -1
	for i, e := range f.found {
		if !f.ok[i] {
			continue
		}
		if pick < 0 || betterSample(s.chunks[e.chunk].size, s.chunks[f.found[pick].chunk].size, s.ck.min) {
			pick = i
		}
	}
	if pick < 0 {
		return
	}
	e := f.found[pick]
	ch := &s.chunks[e.chunk]
	fm := form{kind: f.kind}
	if err := compressForm(&fm, s.plain[ch.prevOff:ch.off+ch.size], ch.off-ch.prevOff, nil); err != nil {
		f.fail("compress chunk %d afresh: %v", e.chunk, err)
	} else if !bytes.Equal(fm.data, e.payload) || fm.aux != e.aux {
		f.fail("chunk %d at offset %d is not what this version compresses it to: made by another compressor", e.chunk, e.off)
	} else {
		return
	}
	clear(f.ok)
}

// betterSample reports whether a chunk of size a is a better sample than one of size b: the
// smallest chunk of at least min bytes (every chunk but the last has), else the largest.
func betterSample(a, b, min int) bool {
	if (a >= min) != (b >= min) {
		return a >= min
	}
	if a >= min {
		return a < b
	}
	return a > b
}

func countOK(ok []bool) int {
	n := 0
	for _, b := range ok {
		if b {
			n++
		}
	}
	return n
}

func (s *seeder) stats() SeedStats {
	st := SeedStats{Chunks: len(s.chunks)}
	for _, p := range []struct {
		f *seedForm
		c *SeedCounts
	}{{&s.gz, &st.Gzip}, {&s.xz, &st.XZ}} {
		p.c.Present = countOK(p.f.present)
		p.c.Seeded = countOK(p.f.ok)
		p.c.Skipped = st.Chunks - p.c.Present - p.c.Seeded
		p.c.Why = p.f.why
		if p.c.Why == nil && p.c.Skipped > 0 {
			p.c.Why = fmt.Errorf("%s: %w: no member or LZMA2 data holds exactly a chunk Build cuts", p.f.file, errSeed)
		}
	}
	return st
}
