package index

import (
	"crypto/sha256"
	"fmt"
	"runtime"
	"slices"

	"github.com/armor-apt/armor/debian/release"
	"github.com/armor-apt/armor/gen/xz"
	"golang.org/x/sync/errgroup"
)

// Files is one Packages index in its three served forms.
type Files struct {
	Plain, Gzip, Xz []byte
	// Digests are the sizes and sums Release lists for Plain, Gzip and Xz, in that order.
	Digests [3]Digests
	// Entries names the cache entries the index is made of, its digest state included (nil
	// when built without a cache). Keep them beside the index: when a later build reuses
	// the index unchanged, pass them to Cache.Keep so that Cache.Prune does not evict them.
	Entries []string
}

// Digests are the size and the sums of one served form of an index, as Release lists them.
type Digests = release.Digests

// Build assembles the index of stanzas, in the given order, and its digests. Each stanza is
// one paragraph ending with "\n"; Build follows each with one blank line, as apt-ftparchive
// does, so a non-empty index ends with "\n\n" and an empty one is the empty file (with the
// gzip and xz forms of the empty file). A stanza that is not one such paragraph is an error
// wrapping ErrStanza.
//
// name identifies the index across builds (for example
// "dists/stable/main/binary-amd64/Packages"); it is an opaque key under which c keeps the
// digest state of the build, so that the next build of the same name hashes only what
// follows its first changed chunk. c may be nil: then every chunk is compressed and every
// byte hashed.
//
// The result depends only on stanzas, never on name or on what c holds. Compression of the
// chunks missing from c, and hashing, run on all cores.
//
// When the stanzas already lie one after the other in one array, each followed by one
// "\n" (an index spliced in place from its previous version), Files.Plain is that array's
// bytes, not a copy: the caller must not change them while it uses Files.
func Build(stanzas [][]byte, c *Cache, name string) (*Files, error) {
	return build(stanzas, c, name, defaultChunking, nil)
}

// form is one compressed form of a chunk: a gzip member or the chunk's LZMA2 chunks in the
// xz block.
type form struct {
	kind   string
	key    [32]byte // names its cache entry: the chunk's sum (gzip), xzKey (xz)
	data   []byte   // compressed or copied in this build; nil while it is to come from the cache
	cached bool     // the cache holds an entry of size bytes, read straight into the output
	size   int
	off    int    // offset in the output
	aux    uint64 // the chunk's plain length
	crc    uint32 // the check of its cache entry (with a cache only)
}

// chunk is one chunk of the index while it is built.
type chunk struct {
	first, end int // stanzas[first:end]
	off, size  int // its bytes in Files.Plain
	prevOff    int // where the chunk before it starts in Files.Plain (off for the first)
	sum        [32]byte
	known      bool // sum is the previous build's, for bytes a Base showed unchanged
	gz, xz     form
}

func build(stanzas [][]byte, c *Cache, name string, ck chunking, base *Base) (*Files, error) {
	dg, err := newDigester(c, name)
	if err != nil {
		return nil, err
	}
	cut, err := cutChunks(stanzas, ck, base, &dg.old)
	if err != nil {
		return nil, err
	}
	chunks, total := layout(stanzas, cut.ends)
	if len(chunks) == 0 {
		return emptyFiles()
	}
	scanned := 0
	for i, sum := range cut.sums {
		if sum != nil {
			chunks[i].sum, chunks[i].known = *sum, true
		} else {
			scanned += chunks[i].size
		}
	}
	if c != nil {
		c.scanned.Add(int64(scanned))
	}
	// Lay out the plain bytes (unless they are laid out already), hash each chunk and see
	// what the cache holds.
	plain, inPlace := contiguous(stanzas, total), true
	if plain == nil {
		plain, inPlace = make([]byte, total), false
	}
	f := &Files{Plain: plain}
	if err := parallel(len(chunks), func(i int) error {
		fillChunk(&chunks[i], stanzas, f.Plain, inPlace, c)
		return nil
	}); err != nil {
		return nil, err
	}
	if err := parallel(len(chunks), func(i int) error {
		keyXZ(chunks, i, c)
		return nil
	}); err != nil {
		return nil, err
	}
	// The plain form's sums start now, beside the compression: they are the longest.
	dg.chunkSums = make([][32]byte, len(chunks))
	for i := range chunks {
		dg.chunkSums[i] = chunks[i].sum
	}
	dg.streams[formPlain] = splitForm(f, chunks, formPlain, c != nil)
	plainSums := make(chan error, 1)
	go func() { plainSums <- dg.hash(formPlain) }()
	err = compressAll(f, chunks, c, xzHeadOf(chunks, total, ck))
	if err == nil {
		dg.streams[formGzip] = splitForm(f, chunks, formGzip, c != nil)
		dg.streams[formXZ] = splitForm(f, chunks, formXZ, c != nil)
		err = dg.hash(formGzip, formXZ)
	}
	if perr := <-plainSums; err == nil {
		err = perr
	}
	if err == nil {
		err = dg.finish(f)
	}
	if err != nil {
		return nil, err
	}
	if c != nil {
		f.Entries = make([]string, 0, 2*len(chunks)+1)
		for i := range chunks {
			f.Entries = append(f.Entries, entryName(chunks[i].gz.key, kindGzip), entryName(chunks[i].xz.key, kindXZ))
		}
		f.Entries = append(f.Entries, stateName(name))
	}
	return f, nil
}

// compressAll compresses what the cache lacks, then reads the rest straight into
// f.Gzip and f.Xz (after xzHead, the stream and block headers). An entry that fails its
// check on reading is compressed in a second round; that round reads nothing from the
// cache, so there is no third.
func compressAll(f *Files, chunks []chunk, c *Cache, xzHead []byte) error {
	for {
		if err := compressMissing(chunks, f.Plain, c); err != nil {
			return err
		}
		gz, xz, ok, err := assemble(chunks, c, xzHead, f.Plain)
		if err != nil {
			return err
		}
		if ok {
			f.Gzip, f.Xz = gz, xz
			return nil
		}
	}
}

// layout returns the chunks ending at ends, with their places in the plain index, and the
// size of the plain index.
func layout(stanzas [][]byte, ends []int) ([]chunk, int) {
	chunks := make([]chunk, len(ends))
	total, first := 0, 0
	for i, end := range ends {
		size := 0
		for _, s := range stanzas[first:end] {
			size += len(s) + 1
		}
		prevOff := total
		if i > 0 {
			prevOff = chunks[i-1].off
		}
		chunks[i] = chunk{first: first, end: end, off: total, size: size, prevOff: prevOff,
			gz: form{kind: kindGzip}, xz: form{kind: kindXZ}}
		total += size
		first = end
	}
	return chunks, total
}

// emptyFiles returns the index of no stanzas: the empty file, and its gzip and xz forms
// (one empty member; a stream of no blocks), as gzip -n and xz write them.
func emptyFiles() (*Files, error) {
	gz, err := compressGzipMember(nil)
	if err != nil {
		return nil, fmt.Errorf("build index: %w", err)
	}
	f := &Files{Plain: []byte{}, Gzip: gz, Xz: append(xz.StreamHeader(), xz.IndexAndFooter(nil)...)}
	for i, b := range [][]byte{f.Plain, f.Gzip, f.Xz} {
		f.Digests[i] = digestsOf(b)
	}
	return f, nil
}

// hashStanzas checks every stanza and returns the hashes chunk boundaries are cut on.
func hashStanzas(stanzas [][]byte) ([]uint32, error) {
	hashes := make([]uint32, len(stanzas))
	const batch = 4096
	err := parallel((len(stanzas)+batch-1)/batch, func(b int) error {
		for i := b * batch; i < min(len(stanzas), (b+1)*batch); i++ {
			if err := checkStanza(stanzas[i]); err != nil {
				return fmt.Errorf("build index: stanza %d: %w", i, err)
			}
			hashes[i] = stanzaHash(stanzas[i])
		}
		return nil
	})
	return hashes, err
}

// contiguous returns the plain index of stanzas, total bytes long, when the stanzas lie
// one after the other in one array, each followed by "\n": then it is their array's bytes.
// Otherwise it returns nil.
func contiguous(stanzas [][]byte, total int) []byte {
	if len(stanzas) == 0 || cap(stanzas[0]) < total {
		return nil
	}
	for i, s := range stanzas {
		n := len(s)
		if n == 0 || cap(s) < n+1 || s[:n+1][n] != '\n' {
			return nil
		}
		if i+1 < len(stanzas) && (cap(s) < n+2 || len(stanzas[i+1]) == 0 || &s[:n+2][n+1] != &stanzas[i+1][0]) {
			return nil
		}
	}
	return stanzas[0][:total:total]
}

// fillChunk copies the chunk's stanzas into plain (unless they are there already: inPlace),
// hashes them (unless their sum is known) and notes whether the cache holds their gzip
// member.
func fillChunk(ch *chunk, stanzas [][]byte, plain []byte, inPlace bool, c *Cache) {
	p := plain[ch.off : ch.off+ch.size]
	if !inPlace {
		p = p[:0]
		for _, s := range stanzas[ch.first:ch.end] {
			p = append(p, s...)
			p = append(p, '\n')
		}
	}
	if c == nil {
		return
	}
	if !ch.known {
		ch.sum = sha256.Sum256(p)
	}
	ch.gz.key = ch.sum
	ch.gz.size, ch.gz.cached = c.size(entryName(ch.gz.key, kindGzip))
}

// keyXZ gives chunks[i]'s xz form its key, from its sum and its predecessor's, and notes
// whether the cache holds it.
func keyXZ(chunks []chunk, i int, c *Cache) {
	if c == nil {
		return
	}
	var prev [32]byte
	if i > 0 {
		prev = chunks[i-1].sum
	}
	ch := &chunks[i]
	ch.xz.key = xzKey(prev, ch.sum)
	ch.xz.size, ch.xz.cached = c.size(entryName(ch.xz.key, kindXZ))
}

// compressMissing compresses every form that has no data and is not cached, each on its own
// core, and stores it in c.
func compressMissing(chunks []chunk, plain []byte, c *Cache) error {
	var jobs []func() error
	for i := range chunks {
		ch := &chunks[i]
		for _, fm := range []*form{&ch.gz, &ch.xz} {
			if fm.data == nil && !fm.cached {
				jobs = append(jobs, func() error {
					return compressForm(fm, plain[ch.prevOff:ch.off+ch.size], ch.off-ch.prevOff, c)
				})
			}
		}
	}
	return parallel(len(jobs), func(i int) error { return jobs[i]() })
}

// compressForm compresses the chunk plain[start:] into fm (plain[:start] being the chunk
// before it, which only the xz form reads) and stores it in c under fm's key.
func compressForm(fm *form, plain []byte, start int, c *Cache) error {
	switch fm.kind {
	case kindGzip:
		gz, err := compressGzipMember(plain[start:])
		if err != nil {
			return fmt.Errorf("build index: %w", err)
		}
		fm.data = gz
	case kindXZ:
		fm.data = xz.EncodeLZMA2(plain, start, xz.DefaultEffort)
	}
	fm.aux = uint64(len(plain) - start)
	fm.size = len(fm.data)
	if c == nil {
		return nil
	}
	c.misses.Add(1)
	var err error
	fm.crc, err = c.put(entryName(fm.key, fm.kind), fm.data, fm.aux)
	return err
}

// assemble writes the gzip members one after the other, and the chunks' LZMA2 data into
// the one block of an xz stream after xzHead (its stream and block headers), reading
// cached forms straight into place. ok is false when a cached entry failed its check: that
// form is then marked for compression, and every form read so far keeps a copy of its
// bytes, so that the next round reads nothing from the cache.
func assemble(chunks []chunk, c *Cache, xzHead, plain []byte) (gz, xzData []byte, ok bool, err error) {
	gzSize, xzSize := 0, len(xzHead)
	for i := range chunks {
		ch := &chunks[i]
		ch.gz.off, ch.xz.off = gzSize, xzSize
		gzSize += ch.gz.size
		xzSize += ch.xz.size
	}
	gz = make([]byte, gzSize)
	xzData = make([]byte, xzSize, xzSize+xzTailBound)
	copy(xzData, xzHead)
	bad := make([]bool, len(chunks))
	err = parallel(len(chunks), func(i int) error {
		ch := &chunks[i]
		for _, fm := range []*form{&ch.gz, &ch.xz} {
			out := gz
			if fm.kind == kindXZ {
				out = xzData
			}
			dst := out[fm.off : fm.off+fm.size]
			if fm.data != nil {
				copy(dst, fm.data)
				continue
			}
			m, ok, err := c.readInto(entryName(fm.key, fm.kind), dst)
			if err != nil {
				return err
			}
			if ok && m.aux == uint64(ch.size) {
				fm.aux, fm.crc = m.aux, m.crc
				c.hits.Add(1)
				continue
			}
			if ok {
				c.corrupt.Add(1)
			}
			fm.cached = false
			bad[i] = true
		}
		return nil
	})
	if err != nil {
		return nil, nil, false, err
	}
	if slices.Contains(bad, true) {
		for i := range chunks {
			for _, fm := range []*form{&chunks[i].gz, &chunks[i].xz} {
				if fm.cached && fm.data == nil {
					out := gz
					if fm.kind == kindXZ {
						out = xzData
					}
					fm.data = slices.Clone(out[fm.off : fm.off+fm.size])
				}
			}
		}
		return nil, nil, false, nil
	}
	return gz, finishXZ(xzData, len(xzHead)-xz.HeaderSize, len(plain), plainCRC(chunks, gz, plain)), true, nil
}

// parallel runs fn(0..n-1) on all cores and returns the first error.
func parallel(n int, fn func(i int) error) error {
	var g errgroup.Group
	g.SetLimit(runtime.GOMAXPROCS(0))
	for i := range n {
		g.Go(func() error { return fn(i) })
	}
	return g.Wait()
}
