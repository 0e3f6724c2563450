package index

import (
	"crypto/sha256"
	"fmt"
	"runtime"

	"golang.org/x/sync/errgroup"
)

// Files is one Packages index in its three served forms.
type Files struct {
	Plain, Gzip, Xz []byte
}

// Build assembles the index of stanzas, in the given order. Each stanza is one paragraph
// ending with "\n"; Build follows each with one blank line, as apt-ftparchive does, so a
// non-empty index ends with "\n\n" and an empty one is the empty file (with the gzip and xz
// forms of the empty file). c may be nil: then every chunk is compressed.
//
// The result depends only on stanzas, never on what c holds. Compression of the chunks
// missing from c runs on all cores.
func Build(stanzas [][]byte, c *Cache) (*Files, error) {
	return build(stanzas, c, defaultChunking)
}

// chunk is one chunk of the index while it is built.
type chunk struct {
	first, end int // stanzas[first:end]
	off, size  int // its bytes in Files.Plain
	sum        [32]byte
	gz         []byte
	xz         xzBlock
}

func build(stanzas [][]byte, c *Cache, ck chunking) (*Files, error) {
	hashes, err := hashStanzas(stanzas)
	if err != nil {
		return nil, err
	}
	ends := ck.cut(stanzas, hashes)
	chunks := make([]chunk, len(ends))
	total, first := 0, 0
	for i, end := range ends {
		size := 0
		for _, s := range stanzas[first:end] {
			size += len(s) + 1
		}
		chunks[i] = chunk{first: first, end: end, off: total, size: size}
		total += size
		first = end
	}
	f := &Files{Plain: make([]byte, total)}

	// Lay out the plain bytes, hash each chunk and look it up; then compress what the cache
	// did not have, gzip and xz of one chunk as separate jobs so that they run in parallel.
	var missing []func() error
	if err := parallel(len(chunks), func(i int) error {
		return fillChunk(&chunks[i], stanzas, f.Plain, c)
	}); err != nil {
		return nil, err
	}
	for i := range chunks {
		ch := &chunks[i]
		plain := f.Plain[ch.off : ch.off+ch.size]
		if ch.gz == nil {
			missing = append(missing, func() error { return compressGzipChunk(ch, plain, c) })
		}
		if ch.xz.data == nil {
			missing = append(missing, func() error { return compressXZChunk(ch, plain, c) })
		}
	}
	if err := parallel(len(missing), func(i int) error { return missing[i]() }); err != nil {
		return nil, err
	}
	f.Gzip, f.Xz, err = assemble(chunks)
	if err != nil {
		return nil, err
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

// fillChunk copies the chunk's stanzas into plain, hashes them and takes whatever
// compressed forms the cache holds.
func fillChunk(ch *chunk, stanzas [][]byte, plain []byte, c *Cache) error {
	p := plain[ch.off:ch.off]
	for _, s := range stanzas[ch.first:ch.end] {
		p = append(p, s...)
		p = append(p, '\n')
	}
	if c == nil {
		return nil
	}
	ch.sum = sha256.Sum256(p)
	gz, aux, ok, err := c.get(entryName(ch.sum, kindGzip))
	if err != nil {
		return err
	}
	if ok && aux == uint64(len(p)) {
		ch.gz = gz
		c.hits.Add(1)
	}
	xz, aux, ok, err := c.get(entryName(ch.sum, kindXZ))
	if err != nil {
		return err
	}
	if ok && validCachedBlock(xz, aux, len(p)) {
		ch.xz = xzBlock{data: xz, unpadded: aux, uncompressed: uint64(len(p))}
		c.hits.Add(1)
	}
	return nil
}

// validCachedBlock checks that a cached block's recorded unpadded size fits its length.
func validCachedBlock(data []byte, unpadded uint64, plainLen int) bool {
	return len(data)%4 == 0 && unpadded <= uint64(len(data)) && uint64(len(data))-unpadded < 4 &&
		plainLen > 0
}

func compressGzipChunk(ch *chunk, plain []byte, c *Cache) error {
	gz, err := compressGzipMember(plain)
	if err != nil {
		return fmt.Errorf("build index: %w", err)
	}
	ch.gz = gz
	if c == nil {
		return nil
	}
	c.misses.Add(1)
	return c.put(entryName(ch.sum, kindGzip), gz, uint64(len(plain)))
}

func compressXZChunk(ch *chunk, plain []byte, c *Cache) error {
	b, err := compressXZBlock(plain)
	if err != nil {
		return fmt.Errorf("build index: %w", err)
	}
	ch.xz = b
	if c == nil {
		return nil
	}
	c.misses.Add(1)
	return c.put(entryName(ch.sum, kindXZ), b.data, b.unpadded)
}

// assemble concatenates the gzip members, and wraps the xz blocks into one stream.
func assemble(chunks []chunk) (gz, xz []byte, err error) {
	if len(chunks) == 0 {
		// The gzip form of the empty file is one member holding nothing.
		empty, err := compressGzipMember(nil)
		if err != nil {
			return nil, nil, fmt.Errorf("build index: %w", err)
		}
		return empty, append(xzStreamHeader(), xzIndexAndFooter(nil)...), nil
	}
	gzSize, xzSize := 0, 2*xzHeaderSize+16+len(chunks)*20
	blocks := make([]xzBlock, len(chunks))
	for i := range chunks {
		gzSize += len(chunks[i].gz)
		xzSize += len(chunks[i].xz.data)
		blocks[i] = chunks[i].xz
	}
	gz = make([]byte, 0, gzSize)
	xz = make([]byte, 0, xzSize)
	xz = append(xz, xzStreamHeader()...)
	for i := range chunks {
		gz = append(gz, chunks[i].gz...)
		xz = append(xz, chunks[i].xz.data...)
	}
	xz = append(xz, xzIndexAndFooter(blocks)...)
	return gz, xz, nil
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
