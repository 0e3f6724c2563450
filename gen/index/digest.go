package index

import (
	"bytes"
	"cmp"
	"crypto/md5"
	"crypto/sha256"
	"encoding"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"slices"
)

// The digests Release lists follow the change too. Each served form is a head (the xz
// stream and block headers), one piece per chunk (its plain bytes, its gzip member, its
// LZMA2 data) and a tail (the end of the xz block, its index and footer). Every boundary
// after a piece has a chain id: the SHA-256 of the previous id and of the piece's
// identity, the first id being that of the form and its head. A plain piece is identified
// by its SHA-256 (the chunk's); a compressed one by its cache key (xzKey for the xz form)
// and its size, aux value and entry check (CRC-32C), so that a
// member written by another compressor version under the same entry name breaks the chain
// too. Equal ids therefore mean equal bytes up to the boundary.
//
// After a build with a cache, one entry per index name (its digest state) records each
// boundary's id and the MD5 and SHA-256 states there. The next build of that name
// walks its own ids from the start while they match the recorded ones, resumes each sum
// from the last match and hashes only the rest: inserting a stanza costs the bytes from its
// chunk to the end of each form, not the whole index. The state is an ordinary cache entry
// (atomic write, CRC-32C of its name and contents): a missing, torn or altered one, or one
// of another index, only means hashing more. Since the ids come from the content, the
// digests never depend on which state was found.
//
// The state also records the SHA-256 of the plain form it was recorded for and of each of
// its chunks. A build told which bytes of its stanzas are that index's (a Base: an index
// spliced from its previous version) takes the chunks within them, and their sums, from
// the state rather than cutting and hashing them again (see base.go).

// Forms of an index, in the order of Files.Digests.
const (
	formPlain = iota
	formGzip
	formXZ
	nForms
)

// kindDigest is the entry kind of a digest state. Change it whenever the chain ids or the
// state format change.
const kindDigest = "dgst3"

// chainTag starts every chain id.
const chainTag = "armor index digest chain 1\x00"

// formKinds name the forms in their chain ids.
var formKinds = [nForms]string{"plain", kindGzip, kindXZ}

// nSums is how many sums Release lists of each file: MD5 and SHA-256, as Debian's archive
// does. SHA-1, which apt no longer trusts and Debian's Release files dropped, is not
// computed: at 100,000 packages it was a fifth of the hashing of a change.
const nSums = 2

// sumNews make the hashes of a Digests, in the order MD5, SHA-256. Their hashes marshal
// and unmarshal their state (encoding.BinaryMarshaler and BinaryUnmarshaler).
var sumNews = [nSums]func() hash.Hash{md5.New, sha256.New}

// sumCost is the relative CPU cost per byte of each sum, as measured on hardware with
// SHA-NI (docs/benchmarks.md): MD5 is the slower. It orders the hashing jobs, longest
// first.
var sumCost = [nSums]int64{8, 3}

// stream is one form of an index as its digests see it.
type stream struct {
	head, tail []byte
	pieces     [][]byte
	ends       []uint64   // offset in the form after each piece
	ids        [][32]byte // chain id after each piece (with a cache only)
}

// boundary is the recorded state of one form after one of its pieces.
type boundary struct {
	id    [32]byte
	end   uint64        // bytes of the form up to the boundary, head included
	state [nSums][]byte // marshaled MD5 and SHA-256 states after those bytes
}

// digestState is what a build records for the next one: every boundary of every form,
// and the sums of the plain form and of its chunks.
type digestState struct {
	forms [nForms][]boundary
	// plain is the SHA-256 of the plain form, and chunks the SHA-256 of each of its chunks
	// (the pieces of forms[formPlain]): what a Base is checked against. Both are set
	// whenever forms is.
	plain  [32]byte
	chunks [][32]byte
}

// stateName returns the name of the digest state entry of the index called name.
func stateName(name string) string {
	return entryName(sha256.Sum256([]byte(name)), kindDigest)
}

// sumJob is one sum of one form to compute; cost orders the jobs, longest first.
type sumJob struct {
	form, sum int
	cost      int64
}

// digester computes the digests of an index's forms, each resumed from the digest state
// recorded under the index's name. The plain form is known before the compressed ones,
// so its sums (the MD5 of the plain bytes is the longest) run while the chunks are
// compressed and assembled: hash and the forms it is given may run beside one another.
type digester struct {
	c          *Cache
	name       string
	old        digestState
	oldPayload []byte
	streams    [nForms]stream
	chunkSums  [][32]byte // the SHA-256 of each chunk of the plain form
	next       digestState
	sums       [nForms][nSums][]byte
}

// newDigester loads the digest state recorded under name (none without a cache).
func newDigester(c *Cache, name string) (*digester, error) {
	old, oldPayload, err := c.loadDigestState(name)
	if err != nil {
		return nil, err
	}
	return &digester{c: c, name: name, old: old, oldPayload: oldPayload}, nil
}

// hash computes the sums of the given forms, whose streams are set, on all cores.
func (d *digester) hash(forms ...int) error {
	var (
		from   [nForms]int              // first piece to hash
		start  [nForms][nSums]hash.Hash // the sums before that piece; nil: start with the head
		jobs   []sumJob
		hashed int64
	)
	for _, fi := range forms {
		s := &d.streams[fi]
		from[fi], start[fi] = resume(s, d.old.forms[fi], d.c)
		n := s.sizeFrom(from[fi])
		hashed += n
		for a := range sumNews {
			jobs = append(jobs, sumJob{form: fi, sum: a, cost: n * sumCost[a]})
		}
		if d.c != nil {
			d.next.forms[fi] = s.boundaries(d.old.forms[fi][:from[fi]])
		}
	}
	slices.SortStableFunc(jobs, func(a, b sumJob) int { return cmp.Compare(b.cost, a.cost) })
	err := parallel(len(jobs), func(j int) error {
		fi, a := jobs[j].form, jobs[j].sum
		s := &d.streams[fi]
		h := start[fi][a]
		if h == nil {
			h = sumNews[a]()
			h.Write(s.head)
		}
		for i := from[fi]; i < len(s.pieces); i++ {
			h.Write(s.pieces[i])
			if d.next.forms[fi] != nil {
				st, err := h.(encoding.BinaryMarshaler).MarshalBinary()
				if err != nil {
					return fmt.Errorf("digest index: %w", err)
				}
				d.next.forms[fi][i].state[a] = st
			}
		}
		h.Write(s.tail)
		d.sums[fi][a] = h.Sum(nil)
		return nil
	})
	if d.c != nil {
		d.c.digested.Add(hashed)
	}
	return err
}

// finish sets f.Digests from the sums of every form, and records the new digest state.
func (d *digester) finish(f *Files) error {
	for fi, data := range [][]byte{f.Plain, f.Gzip, f.Xz} {
		f.Digests[fi] = Digests{
			Size:   int64(len(data)),
			MD5:    hex.EncodeToString(d.sums[fi][0]),
			SHA256: hex.EncodeToString(d.sums[fi][1]),
		}
	}
	if d.c == nil {
		return nil
	}
	d.next.plain = [32]byte(d.sums[formPlain][1])
	d.next.chunks = d.chunkSums
	if payload := d.next.encode(); !bytes.Equal(payload, d.oldPayload) {
		if _, err := d.c.put(stateName(d.name), payload, 0); err != nil {
			return err
		}
	}
	return nil
}

// sizeFrom returns how many bytes of s are hashed when resuming before piece k.
func (s *stream) sizeFrom(k int) int64 {
	n := int64(len(s.tail))
	if k == 0 {
		n += int64(len(s.head))
	}
	for _, p := range s.pieces[k:] {
		n += int64(len(p))
	}
	return n
}

// boundaries returns the boundaries of s to record: those of prefix, then the ids and ends
// of the following ones, whose states the hashing fills in.
func (s *stream) boundaries(prefix []boundary) []boundary {
	bs := make([]boundary, len(s.pieces))
	copy(bs, prefix)
	for i := len(prefix); i < len(bs); i++ {
		bs[i].id, bs[i].end = s.ids[i], s.ends[i]
	}
	return bs
}

// splitForm cuts form fi of f into its pieces, one per chunk, and gives each boundary its
// chain id when chained. The plain form needs only f.Plain; the others, f.Gzip and f.Xz.
func splitForm(f *Files, chunks []chunk, fi int, chained bool) stream {
	var s stream
	if fi == formXZ {
		last := &chunks[len(chunks)-1]
		s.head = f.Xz[:chunks[0].xz.off]
		s.tail = f.Xz[last.xz.off+last.xz.size:]
	}
	s.pieces = make([][]byte, len(chunks))
	s.ends = make([]uint64, len(chunks))
	end := uint64(len(s.head))
	var id [32]byte
	if chained {
		s.ids = make([][32]byte, len(chunks))
		id = sha256.Sum256([]byte(chainTag + formKinds[fi] + "\x00" + string(s.head)))
	}
	for i := range chunks {
		ch := &chunks[i]
		var fm *form // nil for the plain form
		key := ch.sum
		switch fi {
		case formPlain:
			s.pieces[i] = f.Plain[ch.off : ch.off+ch.size]
		case formGzip:
			fm = &ch.gz
			s.pieces[i] = f.Gzip[fm.off : fm.off+fm.size]
		case formXZ:
			fm = &ch.xz
			s.pieces[i] = f.Xz[fm.off : fm.off+fm.size]
		}
		if fm != nil {
			key = fm.key
		}
		end += uint64(len(s.pieces[i]))
		s.ends[i] = end
		if chained {
			id = chainNext(id, key, len(s.pieces[i]), fm)
			s.ids[i] = id
		}
	}
	return s
}

// chainNext returns the chain id after a piece of size bytes of the chunk whose plain bytes
// hash to sum, or of the compressed form fm whose key is sum (nil for the plain bytes). The
// entry check of a compressed form is in the id, so that bytes compressed afresh never
// pass for different bytes of the same chunk read from the cache.
func chainNext(prev, sum [32]byte, size int, fm *form) [32]byte {
	var b [32 + 32 + 8 + 8 + 4]byte
	copy(b[:], prev[:])
	copy(b[32:], sum[:])
	binary.LittleEndian.PutUint64(b[64:], uint64(size))
	if fm != nil {
		binary.LittleEndian.PutUint64(b[72:], fm.aux)
		binary.LittleEndian.PutUint32(b[80:], fm.crc)
	}
	return sha256.Sum256(b[:])
}

// resume returns how many leading pieces of s the recorded boundaries old cover, with the
// sums restored to their state after those pieces (nil sums when none is covered). A state
// that does not unmarshal is counted as corrupt and ignored.
func resume(s *stream, old []boundary, c *Cache) (int, [nSums]hash.Hash) {
	var hs [nSums]hash.Hash
	k := 0
	for k < len(s.ids) && k < len(old) && old[k].id == s.ids[k] && old[k].end == s.ends[k] {
		k++
	}
	if k == 0 {
		return 0, hs
	}
	for a := range hs {
		hs[a] = sumNews[a]()
		if err := hs[a].(encoding.BinaryUnmarshaler).UnmarshalBinary(old[k-1].state[a]); err != nil {
			c.corrupt.Add(1)
			return 0, [nSums]hash.Hash{}
		}
	}
	return k, hs
}

// loadDigestState returns the digest state recorded under name, and its encoding. A
// missing state is the empty one, and so is a damaged one, which is counted as corrupt.
// A nil cache has none.
func (c *Cache) loadDigestState(name string) (digestState, []byte, error) {
	if c == nil {
		return digestState{}, nil, nil
	}
	entry := stateName(name)
	size, ok := c.size(entry)
	if !ok {
		return digestState{}, nil, nil
	}
	payload := make([]byte, size)
	m, ok, err := c.readInto(entry, payload)
	if err != nil || !ok {
		return digestState{}, nil, err
	}
	st, err := decodeDigestState(payload)
	if err != nil || m.aux != 0 {
		c.corrupt.Add(1)
		return digestState{}, nil, nil
	}
	return st, payload, nil
}

// The encoding of a digest state: stateMagic, then for each form a uint32 count of
// boundaries followed by each boundary: its id (32 bytes), its end (uint64) and its nSums
// states, each a uint16 length and the bytes; then the plain form's SHA-256 and its
// chunks' (32 bytes each, as many as the plain form has boundaries). Integers are
// little-endian. The cache entry around it carries the check.
var stateMagic = []byte("AIXDGST3")

// minBoundarySize is the encoded size of a boundary with empty states.
const minBoundarySize = 32 + 8 + nSums*2

var errDigestState = errors.New("malformed digest state")

func (st *digestState) encode() []byte {
	size := len(stateMagic) + 32 + 32*len(st.chunks)
	for _, bs := range st.forms {
		size += 4
		for _, b := range bs {
			size += minBoundarySize
			for _, s := range b.state {
				size += len(s)
			}
		}
	}
	out := make([]byte, 0, size)
	out = append(out, stateMagic...)
	for _, bs := range st.forms {
		out = binary.LittleEndian.AppendUint32(out, uint32(len(bs)))
		for _, b := range bs {
			out = append(out, b.id[:]...)
			out = binary.LittleEndian.AppendUint64(out, b.end)
			for _, s := range b.state {
				out = binary.LittleEndian.AppendUint16(out, uint16(len(s)))
				out = append(out, s...)
			}
		}
	}
	out = append(out, st.plain[:]...)
	for _, c := range st.chunks {
		out = append(out, c[:]...)
	}
	return out
}

// decodeDigestState parses an encoded digest state. The states it returns share b's
// memory. Whatever it accepts, encode writes back byte for byte.
func decodeDigestState(b []byte) (digestState, error) {
	var st digestState
	if !bytes.HasPrefix(b, stateMagic) {
		return st, fmt.Errorf("%w: no magic", errDigestState)
	}
	b = b[len(stateMagic):]
	for fi := range st.forms {
		if len(b) < 4 {
			return digestState{}, fmt.Errorf("%w: truncated count", errDigestState)
		}
		n := binary.LittleEndian.Uint32(b)
		b = b[4:]
		if uint64(n) > uint64(len(b)/minBoundarySize) {
			return digestState{}, fmt.Errorf("%w: %d boundaries in %d bytes", errDigestState, n, len(b))
		}
		bs := make([]boundary, n)
		for i := range bs {
			if len(b) < 40 {
				return digestState{}, fmt.Errorf("%w: truncated boundary", errDigestState)
			}
			copy(bs[i].id[:], b)
			bs[i].end = binary.LittleEndian.Uint64(b[32:])
			b = b[40:]
			for a := range bs[i].state {
				if len(b) < 2 {
					return digestState{}, fmt.Errorf("%w: truncated state", errDigestState)
				}
				l := int(binary.LittleEndian.Uint16(b))
				b = b[2:]
				if l > len(b) {
					return digestState{}, fmt.Errorf("%w: truncated state", errDigestState)
				}
				bs[i].state[a] = b[:l:l]
				b = b[l:]
			}
		}
		st.forms[fi] = bs
	}
	if n := len(st.forms[formPlain]); len(b) != 32*(n+1) {
		return digestState{}, fmt.Errorf("%w: %d bytes for the sums of %d chunks", errDigestState, len(b), n)
	}
	st.plain = [32]byte(b)
	st.chunks = make([][32]byte, len(st.forms[formPlain]))
	for i := range st.chunks {
		st.chunks[i] = [32]byte(b[32*(i+1):])
	}
	return st, nil
}

// digestsOf hashes data whole.
func digestsOf(data []byte) Digests {
	d := Digests{Size: int64(len(data))}
	for a, sum := range [nSums]*string{&d.MD5, &d.SHA256} {
		h := sumNews[a]()
		h.Write(data)
		*sum = hex.EncodeToString(h.Sum(nil))
	}
	return d
}
