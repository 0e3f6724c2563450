package index

import (
	"bytes"
	"fmt"
	"time"

	"github.com/klauspost/compress/gzip"
)

// gzipLevel is the deflate level of every member; Debian's archive uses gzip -9 too.
const gzipLevel = gzip.BestCompression

// compressGzipMember compresses plain into one complete gzip member with a deterministic
// header: no name, no comment, mtime 0, OS "Unix" (as gzip -n writes it).
func compressGzipMember(plain []byte) ([]byte, error) {
	var buf bytes.Buffer
	buf.Grow(len(plain)/4 + 64)
	w, err := gzip.NewWriterLevel(&buf, gzipLevel)
	if err != nil {
		return nil, fmt.Errorf("start gzip encoder: %w", err)
	}
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
func Gunzip(gz []byte, size int) ([]byte, []GzipMember, error) {
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
