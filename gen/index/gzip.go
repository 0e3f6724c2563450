package index

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/gzip"
	"golang.org/x/sync/errgroup"
)

// gzipLevel is the deflate level of every member; Debian's archive uses gzip -9 too.
const gzipLevel = gzip.BestCompression

// gzipWriters keeps gzip encoders between members: each holds about a megabyte of tables,
// and a first build compresses an index member by member.
var gzipWriters = sync.Pool{New: func() any {
	w, err := gzip.NewWriterLevel(io.Discard, gzipLevel)
	if err != nil {
		panic(err) // gzipLevel is a valid level
	}
	return w
}}

// compressGzipMember compresses plain into one complete gzip member with a deterministic
// header: no name, no comment, mtime 0, OS "Unix" (as gzip -n writes it).
func compressGzipMember(plain []byte) ([]byte, error) {
	var buf bytes.Buffer
	buf.Grow(len(plain)/4 + 64)
	w := gzipWriters.Get().(*gzip.Writer)
	defer gzipWriters.Put(w)
	w.Reset(&buf) // the header too
	w.ModTime = time.Unix(0, 0)
	w.OS = 3
	if _, err := w.Write(plain); err != nil {
		return nil, fmt.Errorf("gzip encode: %w", err)
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("gzip encode: %w", err)
	}
	return buf.Bytes(), nil
}

// GzipMember is where one member of a gzip file lies, in the file and in its plain bytes.
type GzipMember struct {
	Off, Size           int // the member's bytes in the gzip file
	PlainOff, PlainSize int // the bytes it decompresses to, in the plain file
}

// PlainCap is the capacity to give the array of a plain index of size bytes: the room
// beyond size lets the next index be spliced in place of this one (see gen's
// oldIndex.splice), about a thousand new stanzas at 100,000 packages.
func PlainCap(size int) int {
	size = max(size, 0)
	return size + size/64 + bytes.MinRead
}

// Gunzip decompresses gz, one gzip member or several concatenated, member by member, and
// returns the plain bytes and where each member lies. size is the expected plain size,
// which sizes the output once (a hint: any size works). Each member's CRC-32 and length
// are checked, as gzip -d checks them. A Packages.gz index that Build wrote has one member
// per chunk: Cache.SeedGunzipped then takes its members as they are, without decoding
// them a second time.
//
// The members of a file Build wrote are found without decoding them, by the header
// compressGzipMember gives each (see gunzipMembers), and decoded on every core at once.
func Gunzip(gz []byte, size int) ([]byte, []GzipMember, error) {
	if plain, members, ok := gunzipMembers(gz); ok {
		return plain, members, nil
	}
	return gunzipSerial(gz, size)
}

// gunzipSerial is Gunzip, one member after the other.
func gunzipSerial(gz []byte, size int) ([]byte, []GzipMember, error) {
	plain := bytes.NewBuffer(make([]byte, 0, PlainCap(size)))
	br := bytes.NewReader(gz)
	var zr gzip.Reader
	var members []GzipMember
	for br.Len() > 0 || len(members) == 0 {
		off := len(gz) - br.Len()
		if err := zr.Reset(br); err != nil {
			return nil, nil, fmt.Errorf("gzip member at offset %d: %w", off, err)
		}
		zr.Multistream(false) // stop after this member, br just after its trailer
		start := plain.Len()
		if _, err := plain.ReadFrom(&zr); err != nil {
			return nil, nil, fmt.Errorf("gzip member at offset %d: %w", off, err)
		}
		members = append(members, GzipMember{Off: off, Size: len(gz) - br.Len() - off,
			PlainOff: start, PlainSize: plain.Len() - start})
	}
	return plain.Bytes(), members, nil
}

// memberHeader is the header compressGzipMember gives every member: deflate, no flags,
// mtime 0, XFL 2 (best compression), OS 3 (Unix).
var memberHeader = []byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 2, 3}

// parallelGunzipMin is the smallest file gunzipMembers decodes member by member in
// parallel: below it one core does it about as fast.
const parallelGunzipMin = 1 << 20

// gunzipMembers decodes gz as Gunzip does, its members at once on every core. Deflate
// data does not say where it ends until it is decoded, so the members are found by the
// header each member of Build's starts with; a member's plain size is in its trailer
// (ISIZE). Ten given bytes may still occur inside deflate data: a member found there
// fails to decode to exactly its trailer's size and CRC up to the next one. Then, or for
// any other file, ok is false and Gunzip decodes member after member instead.
func gunzipMembers(gz []byte) (plain []byte, members []GzipMember, ok bool) {
	if len(gz) < parallelGunzipMin || !bytes.HasPrefix(gz, memberHeader) {
		return nil, nil, false
	}
	var starts []int
	for off := 0; off < len(gz); {
		i := bytes.Index(gz[off:], memberHeader)
		if i < 0 {
			break
		}
		starts = append(starts, off+i)
		off += i + len(memberHeader)
	}
	total := 0
	for k, start := range starts {
		end := len(gz)
		if k+1 < len(starts) {
			end = starts[k+1]
		}
		if end-start < len(memberHeader)+8 {
			return nil, nil, false
		}
		n := int(binary.LittleEndian.Uint32(gz[end-4:]))
		members = append(members, GzipMember{Off: start, Size: end - start, PlainOff: total, PlainSize: n})
		total += n
	}
	plain = make([]byte, total, PlainCap(total))
	var g errgroup.Group
	g.SetLimit(runtime.GOMAXPROCS(0))
	next := atomic.Int64{}
	for range min(runtime.GOMAXPROCS(0), len(members)) {
		g.Go(func() error {
			var zr gzip.Reader
			for {
				k := int(next.Add(1)) - 1
				if k >= len(members) {
					return nil
				}
				m := members[k]
				br := bytes.NewReader(gz[m.Off : m.Off+m.Size])
				if err := zr.Reset(br); err != nil {
					return err
				}
				zr.Multistream(false)
				if _, err := io.ReadFull(&zr, plain[m.PlainOff:m.PlainOff+m.PlainSize]); err != nil {
					return err
				}
				// The member ends here, its CRC and size checked, and so do its bytes.
				var one [1]byte
				if n, err := zr.Read(one[:]); n != 0 || err != io.EOF || br.Len() != 0 {
					return errors.New("member does not end at the next member")
				}
			}
		})
	}
	if g.Wait() != nil {
		return nil, nil, false
	}
	return plain, members, true
}
