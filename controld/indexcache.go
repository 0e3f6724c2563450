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
	"slices"
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
// profile made at its path, as it streams from the store (readAgainst, splice): the
// members at its start and at its end whose bytes are those of that profile's members
// are taken as read, and only the bytes between are decompressed and parsed. That is
// sound: identical bytes that start where a member starts decompress to the same member;
// the bytes between must decompress to whole members, each ending where a stanza ends,
// and end exactly where the unchanged members start. The whole form is still read and
// its size and SHA-256 checked against the signed ones before its profile is used, so a
// store that alters a byte anywhere is caught; but it is not held in memory, only the
// member being hashed and the bytes to decompress. Anything unusual (a member that ends
// inside a stanza, an error) falls back to reading the whole index, which also gives the
// error its line number.
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
			var err error
			if p, err = s.readAgainst(ctx, ix, form, old); err != nil {
				return nil, err
			}
			if p != nil {
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

// readAgainst streams form, a .gz form, from the store through a splice against old
// and checks its size and SHA-256: the profile, or nil when it cannot be made this way.
// It holds no more of the form in memory than a member and the bytes it decompresses.
func (s *Server) readAgainst(ctx context.Context, ix *index, form manifest.File, old *profile) (*profile, error) {
	rc, err := s.store.Open(ctx, form.SHA256, 0, -1)
	if errors.Is(err, store.ErrNotFound) {
		return nil, invalidRelease("%s (object %s) is not in the store %s: upload it first (armor push)", form.Path, form.SHA256, s.store)
	}
	if err != nil {
		return nil, storeFailed("read %s from the store %s: %w", form.Path, s.store, err)
	}
	defer rc.Close()
	sp := newSplice(old, form.Size, ix)
	h := sha256.New()
	counted := &countingReader{r: io.TeeReader(io.LimitReader(rc, form.Size+1), h)}
	buf := make([]byte, 256<<10)
	for {
		n, err := counted.Read(buf)
		sp.write(buf[:n])
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, storeFailed("read %s from the store %s: %w", form.Path, s.store, err)
		}
	}
	if got := hex.EncodeToString(h.Sum(nil)); counted.n != form.Size || got != form.SHA256 {
		return nil, invalidRelease("%s: store object %s has %d bytes of content with sha256 %s, not %d bytes: the store is damaged, upload it again",
			form.Path, form.SHA256, counted.n, got, form.Size)
	}
	return sp.finish(), nil
}

// splice profiles a .gz form of known size against old as its bytes stream by, keeping
// no more than one member and the bytes it must decompress. The form is cut into
// places: from its start, where old's members would lie if the form began as old did
// (the common start, while each matches); after that, where old's members would lie if
// the form ended as old did. A place whose bytes hash to the member's is that member,
// whose stanzas and size are known; the bytes of the other places, run by run, are
// decompressed and parsed, and must be whole members ending where stanzas end.
type splice struct {
	old   *profile
	ix    *index
	size  int64
	first []int // the position in old.digests of each old member's first stanza
	pos   int64 // bytes written so far
	// The current place: [pos of its first byte, end); which is the old member it may
	// be, or -1 for bytes before the first place of the common end.
	end    int64
	which  int
	inHead bool
	done   bool
	cur    []byte
	raw    []byte  // bytes of places not matched, to decompress
	pieces []piece // the form, in order
	plain  int64
	failed bool
}

// piece is part of a profiled form: an old member, or members decompressed.
type piece struct {
	old     int // the old member; -1 for decompressed ones
	digests []entryDigest
	members []member
}

func newSplice(old *profile, size int64, ix *index) *splice {
	sp := &splice{old: old, ix: ix, size: size, inHead: true, first: make([]int, len(old.members))}
	n := 0
	for i, m := range old.members {
		sp.first[i] = n
		n += m.entries
	}
	sp.nextHead(0)
	return sp
}

// nextHead makes old member i the current place, or ends the common start there.
func (sp *splice) nextHead(i int) {
	ms := sp.old.members
	if i < len(ms) && sp.pos+int64(ms[i].size) <= sp.size {
		sp.which, sp.end = i, sp.pos+int64(ms[i].size)
		return
	}
	sp.inHead = false
	sp.nextTail(-1)
}

// nextTail makes the place after old member j's (of the common end) current; when j is
// -1, the first place of the common end that starts at pos or later, or the bytes
// before it.
func (sp *splice) nextTail(j int) {
	ms := sp.old.members
	if j >= 0 { // the places of the common end follow each other
		if j+1 < len(ms) {
			sp.which, sp.end = j+1, sp.end+int64(ms[j+1].size)
		} else {
			sp.done = true
		}
		return
	}
	start := sp.size // where old member k would start, from the end
	k := len(ms)
	for k > 0 && start-int64(ms[k-1].size) >= sp.pos {
		k--
		start -= int64(ms[k].size)
	}
	switch {
	case j < 0 && start > sp.pos:
		sp.which, sp.end = -1, start
	case k < len(ms):
		sp.which, sp.end = k, start+int64(ms[k].size)
	default:
		sp.done = true
	}
}

// write takes the next bytes of the form.
func (sp *splice) write(b []byte) {
	for len(b) > 0 && !sp.done {
		k := min(int64(len(b)), sp.end-sp.pos)
		sp.cur = append(sp.cur, b[:k]...)
		sp.pos += k
		b = b[k:]
		if sp.pos == sp.end {
			sp.close()
		}
	}
}

// close ends the current place.
func (sp *splice) close() {
	cur := sp.cur
	sp.cur = sp.cur[:0]
	matched := sp.which >= 0 && sha256.Sum256(cur) == sp.old.members[sp.which].sum
	if matched {
		sp.flush()
		m := sp.old.members[sp.which]
		sp.pieces = append(sp.pieces, piece{old: sp.which})
		sp.plain += m.plain
	}
	switch {
	case sp.inHead && matched:
		sp.nextHead(sp.which + 1)
	case sp.inHead:
		// The common start ends before this member: its bytes are the first of the rest.
		sp.pos -= int64(len(cur))
		sp.inHead = false
		sp.nextTail(-1)
		sp.write(slices.Clone(cur))
	default:
		if !matched {
			sp.raw = append(sp.raw, cur...)
		}
		sp.nextTail(sp.which)
	}
}

// flush decompresses the bytes not matched so far.
func (sp *splice) flush() {
	if len(sp.raw) == 0 || sp.failed {
		return
	}
	var pc piece
	pc.old = -1
	var buf []byte
	r := deb.NewIndexReader(sp.ix.kind, func(e *deb.IndexEntry) error {
		var d entryDigest
		d, buf = digestOfEntry(buf, e)
		pc.digests = append(pc.digests, d)
		return nil
	})
	sink := &plainSink{r: r, limit: plainLimit(sp.ix) - sp.plain}
	ms, aligned, err := decodeGzip(sp.raw, sink)
	if err != nil || !aligned || r.Close() != nil {
		sp.failed = true
		return
	}
	pc.members = ms
	sp.pieces = append(sp.pieces, pc)
	sp.plain += sink.n
	sp.raw = sp.raw[:0]
}

// finish returns the profile of the form, or nil when it cannot be made this way.
func (sp *splice) finish() *profile {
	sp.flush()
	if sp.failed || !sp.done || sp.pos != sp.size || (sp.ix.plainOK && sp.plain != sp.ix.plain.Size) {
		return nil // read it whole, for the error
	}
	digests, members := 0, 0
	for _, pc := range sp.pieces {
		if pc.old >= 0 {
			digests, members = digests+sp.old.members[pc.old].entries, members+1
		} else {
			digests, members = digests+len(pc.digests), members+len(pc.members)
		}
	}
	p := &profile{digests: make([]entryDigest, 0, digests), members: make([]member, 0, members)}
	for _, pc := range sp.pieces {
		if pc.old >= 0 {
			m := sp.old.members[pc.old]
			p.digests = append(p.digests, sp.old.digests[sp.first[pc.old]:sp.first[pc.old]+m.entries]...)
			p.members = append(p.members, m)
		} else {
			p.digests = append(p.digests, pc.digests...)
			p.members = append(p.members, pc.members...)
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
