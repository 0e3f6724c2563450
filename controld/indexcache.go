package controld

import (
	"bytes"
	"compress/bzip2"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"path"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"
	"github.com/ulikunitz/xz/lzma"

	"github.com/armor-apt/armor/debian/deb"
	"github.com/armor-apt/armor/manifest"
	"github.com/armor-apt/armor/store"
)

// Reading indexes at a cost proportional to the change. What an index lists depends only
// on its bytes, so the digests of its stanzas are kept by the SHA-256 of the form read
// (a profile): an index a release shares with one verified before costs nothing. armor
// publishes Packages.gz as a concatenation of gzip members, one per chunk of stanzas cut
// on content (gen/index), so that adding a package changes one or two members and leaves
// the others' bytes as they were. A profile of a gzip form therefore also keeps each
// member's size, SHA-256 and stanza count, and a changed index is read against the last
// profile made at its path: the members at its start and at its end whose bytes are
// those of that profile's members are taken as read, and only the bytes between are
// decompressed and parsed. That is sound: identical bytes that start where a member starts
// decompress to the same member; the bytes between must decompress to whole members,
// each ending where a stanza ends, and end exactly where the unchanged members start. The
// whole form is still read and its SHA-256 checked against the signed one, so a store
// that alters a byte anywhere is caught. Anything unusual (a member that ends inside a
// stanza, an error) falls back to reading the whole index, which also gives the error
// its line number.
//
// Profiles live in memory only. After a restart, the first release of each repository
// reads its indexes whole.

// DefaultIndexCacheEntries is the default of Config.IndexCacheEntries: the stanza digests
// (16 bytes each) controld keeps, about 32 MiB.
const DefaultIndexCacheEntries = 1 << 21

// maxIndexPlain bounds an uncompressed index whose size Release does not list.
const maxIndexPlain = 2 << 30

func runtimeCPUs() int { return runtime.GOMAXPROCS(0) }

// profile is what controld knows of one form of an index.
type profile struct {
	digests []entryDigest // of its stanzas, in order
	// members are the gzip members of a .gz form, when each ends where a stanza ends;
	// nil otherwise (and then a change is read whole).
	members []member
	used    uint64
}

// member is one gzip member of a profiled form.
type member struct {
	size    int      // compressed bytes
	sum     [32]byte // of the compressed bytes
	entries int      // stanzas
	plain   int64    // uncompressed bytes
}

type formKey struct {
	sum  string
	kind deb.IndexKind
}

// indexCache keeps profiles, bounded by the number of digests they hold, least recently
// used first out.
type indexCache struct {
	mu     sync.Mutex
	max    int
	total  int
	tick   uint64
	byForm map[formKey]*profile
	lastAt map[string]formKey // repository + "\x00" + form path → the form last profiled there
	// reads counts how indexes were read: from the cache, against a profile, whole.
	reads struct{ cached, incremental, whole atomic.Int64 }
}

func (c *indexCache) get(k formKey) *profile {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.byForm[k]
	if p != nil {
		c.tick++
		p.used = c.tick
	}
	return p
}

// last returns the profile last made at a path of a repository, if it is still kept.
func (c *indexCache) last(repo, formPath string) *profile {
	c.mu.Lock()
	k, ok := c.lastAt[repo+"\x00"+formPath]
	c.mu.Unlock()
	if !ok {
		return nil
	}
	return c.get(k)
}

// put keeps p as the profile of k, read at formPath of repo.
func (c *indexCache) put(repo, formPath string, k formKey, p *profile) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byForm == nil {
		c.byForm, c.lastAt = map[formKey]*profile{}, map[string]formKey{}
	}
	c.lastAt[repo+"\x00"+formPath] = k
	if old := c.byForm[k]; old != nil {
		c.total -= len(old.digests)
	}
	c.tick++
	p.used = c.tick
	c.byForm[k] = p
	c.total += len(p.digests)
	for c.total > c.max && len(c.byForm) > 1 {
		var oldest formKey
		var least *profile
		for k, q := range c.byForm {
			if least == nil || q.used < least.used {
				oldest, least = k, q
			}
		}
		delete(c.byForm, oldest)
		c.total -= len(least.digests)
	}
}

// digests returns the stanza digests of an index: kept, read against the last profile at
// its path, or read whole.
func (c *indexCache) digests(ctx context.Context, s *Server, repo string, ix *index) ([]entryDigest, error) {
	for _, f := range ix.forms {
		if p := c.get(formKey{f.SHA256, ix.kind}); p != nil {
			c.put(repo, f.Path, formKey{f.SHA256, ix.kind}, p)
			c.reads.cached.Add(1)
			return p.digests, nil
		}
	}
	form := ix.forms[0]
	key := formKey{form.SHA256, ix.kind}
	var p *profile
	if path.Ext(form.Path) == ".gz" {
		if old := c.last(repo, form.Path); old != nil && old.members != nil {
			data, err := s.readExact(ctx, form.Path, form.SHA256, form.Size)
			if err != nil {
				return nil, err
			}
			if p = incremental(old, data, ix); p != nil {
				c.reads.incremental.Add(1)
			}
		}
	}
	if p == nil {
		p = &profile{}
		var buf []byte
		members, err := s.readForm(ctx, ix, form, func(e *deb.IndexEntry) error {
			var d entryDigest
			d, buf = digestOfEntry(buf, e)
			p.digests = append(p.digests, d)
			return nil
		})
		if err != nil {
			return nil, err
		}
		p.members = members
		c.reads.whole.Add(1)
	}
	c.put(repo, form.Path, key, p)
	return p.digests, nil
}

// incremental profiles data, a .gz form whose SHA-256 was checked, against old, the
// profile of an earlier form at its path; nil when it cannot (see the top of the file).
func incremental(old *profile, data []byte, ix *index) *profile {
	ms := old.members
	off, i, first := 0, 0, 0 // the common start: bytes, members, stanzas
	for i < len(ms) && off+ms[i].size <= len(data) && sha256.Sum256(data[off:off+ms[i].size]) == ms[i].sum {
		off += ms[i].size
		first += ms[i].entries
		i++
	}
	end, j, last := len(data), len(ms), len(old.digests) // the common end
	for j > i && end-ms[j-1].size >= off && sha256.Sum256(data[end-ms[j-1].size:end]) == ms[j-1].sum {
		end -= ms[j-1].size
		last -= ms[j-1].entries
		j--
	}
	var mid []entryDigest
	var buf []byte
	r := deb.NewIndexReader(ix.kind, func(e *deb.IndexEntry) error {
		var d entryDigest
		d, buf = digestOfEntry(buf, e)
		mid = append(mid, d)
		return nil
	})
	sink := &plainSink{r: r, limit: plainLimit(ix)}
	between, aligned, err := decodeGzip(data[off:end], sink)
	if err != nil || !aligned || r.Close() != nil {
		return nil
	}
	p := &profile{
		digests: make([]entryDigest, 0, first+len(mid)+len(old.digests)-last),
		members: make([]member, 0, i+len(between)+len(ms)-j),
	}
	p.digests = append(append(append(p.digests, old.digests[:first]...), mid...), old.digests[last:]...)
	p.members = append(append(append(p.members, ms[:i]...), between...), ms[j:]...)
	if ix.plainOK {
		var plain int64
		for _, m := range p.members {
			plain += m.plain
		}
		if plain != ix.plain.Size {
			return nil // read it whole, for the error
		}
	}
	return p
}

// plainLimit is the most an index may decompress to.
func plainLimit(ix *index) int64 {
	if ix.plainOK {
		return ix.plain.Size
	}
	return maxIndexPlain
}

// errPlainTooLarge: an index decompresses to more than its limit.
var errPlainTooLarge = errors.New("decompresses to more than Release lists for the uncompressed index")

// plainSink takes an index's uncompressed bytes to its reader, counting and, if h is
// set, hashing them.
type plainSink struct {
	r     *deb.IndexReader
	n     int64
	limit int64
	h     hash.Hash
}

func (p *plainSink) Write(b []byte) (int, error) {
	p.n += int64(len(b))
	if p.n > p.limit {
		return 0, errPlainTooLarge
	}
	if p.h != nil {
		p.h.Write(b)
	}
	return p.r.Write(b)
}

// decodeGzip decompresses data, whole gzip members, member by member into sink, and
// returns the members; aligned reports whether each ended where a stanza ends.
func decodeGzip(data []byte, sink *plainSink) (members []member, aligned bool, err error) {
	br := bytes.NewReader(data) // an io.ByteReader: the decompressor reads no further than it must
	var zr gzip.Reader
	buf := make([]byte, 64<<10)
	aligned = true
	stanzas := 0
	count := sink.r.Count
	for br.Len() > 0 {
		start := len(data) - br.Len()
		if err := zr.Reset(br); err != nil {
			return nil, false, fmt.Errorf("gzip member at byte %d: %w", start, err)
		}
		zr.Multistream(false)
		plain0 := sink.n
		for {
			n, err := zr.Read(buf)
			if n > 0 {
				if _, werr := sink.Write(buf[:n]); werr != nil {
					return nil, false, werr
				}
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				return nil, false, fmt.Errorf("gzip member at byte %d: %w", start, err)
			}
		}
		end := len(data) - br.Len()
		ok := sink.r.AtBoundary()
		aligned = aligned && ok
		c := count()
		members = append(members, member{size: end - start, sum: sha256.Sum256(data[start:end]), entries: c - stanzas, plain: sink.n - plain0})
		stanzas = c
	}
	return members, aligned, nil
}

// readForm reads a form of an index whole, checking its SHA-256 and, when Release lists
// the uncompressed index, the size and SHA-256 of what it decompresses to, and calls fn
// with each stanza. For a .gz form it returns its members when each ends where a stanza
// ends.
func (s *Server) readForm(ctx context.Context, ix *index, form manifest.File, fn func(*deb.IndexEntry) error) ([]member, error) {
	r := deb.NewIndexReader(ix.kind, fn)
	sink := &plainSink{r: r, limit: plainLimit(ix)}
	if ix.plainOK {
		sink.h = sha256.New()
	}
	fail := func(err error) ([]member, error) {
		if errors.Is(err, errStoreRead) {
			return nil, storeFailed("%s: read %s from the store %s: %w", ix.label(), form.Path, s.store, err)
		}
		var apiErr *Error
		if errors.As(err, &apiErr) {
			return nil, err
		}
		return nil, invalidRelease("%s: %s: %w", ix.label(), form.Path, err)
	}
	var members []member
	ext := path.Ext(form.Path)
	if ext == ".gz" {
		data, err := s.readExact(ctx, form.Path, form.SHA256, form.Size)
		if err != nil {
			return nil, err
		}
		ms, aligned, err := decodeGzip(data, sink)
		if err != nil {
			return fail(err)
		}
		if aligned {
			members = ms
		}
	} else if err := s.streamForm(ctx, form, ext, sink); err != nil {
		return fail(err)
	}
	if err := r.Close(); err != nil {
		return fail(err)
	}
	if ix.plainOK {
		if got := hex.EncodeToString(sink.h.Sum(nil)); sink.n != ix.plain.Size || got != ix.plain.SHA256 {
			return fail(fmt.Errorf("decompresses to %d bytes with sha256 %s, but the signed Release lists %s with %d bytes and sha256 %s: apt would refuse it",
				sink.n, got, ix.rel, ix.plain.Size, ix.plain.SHA256))
		}
	}
	return members, nil
}

// errStoreRead marks a failure to read from the object store.
var errStoreRead = errors.New("store read failed")

// streamForm decompresses a form that is not gzip from the store into sink, checking the
// object's size and SHA-256 as it goes.
func (s *Server) streamForm(ctx context.Context, form manifest.File, ext string, sink io.Writer) error {
	rc, err := s.store.Open(ctx, form.SHA256, 0, -1)
	if errors.Is(err, store.ErrNotFound) {
		return invalidRelease("%s (object %s) is not in the store %s: upload it first (armor push)", form.Path, form.SHA256, s.store)
	}
	if err != nil {
		return fmt.Errorf("%w: %w", errStoreRead, err)
	}
	defer rc.Close()
	h := sha256.New()
	counted := &countingReader{r: io.TeeReader(io.LimitReader(rc, form.Size+1), h)}
	var dec io.Reader
	switch ext {
	case "":
		dec = counted
	case ".xz":
		dec, err = xz.NewReader(counted)
	case ".bz2":
		dec = bzip2.NewReader(counted)
	case ".lzma":
		dec, err = lzma.NewReader(counted)
	case ".zst":
		var zd *zstd.Decoder
		if zd, err = zstd.NewReader(counted, zstd.WithDecoderConcurrency(1)); err == nil {
			defer zd.Close()
			dec = zd
		}
	default:
		return fmt.Errorf("unknown compression %q", ext)
	}
	if err == nil {
		_, err = io.Copy(sink, dec)
	}
	// What follows the compressed data, or what a failed decompression left, is part of
	// the object too.
	io.Copy(io.Discard, counted)
	if counted.err != nil {
		return fmt.Errorf("%w: %w", errStoreRead, counted.err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); counted.n != form.Size || got != form.SHA256 {
		return invalidRelease("%s: store object %s has content with sha256 %s (%d bytes): the store is damaged, upload it again", form.Path, form.SHA256, got, counted.n)
	}
	return err
}

// countingReader counts what it reads and remembers the underlying reader's error, to
// tell a store failure from a decompression one.
type countingReader struct {
	r   io.Reader
	n   int64
	err error
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	if err != nil && err != io.EOF {
		c.err = err
	}
	return n, err
}
