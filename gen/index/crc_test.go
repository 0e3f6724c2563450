package index

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"math/rand/v2"
	"testing"
)

// TestCRC32Combine: the combined CRC of two pieces is the CRC of both, for pieces of
// every length from none to a few MB.
func TestCRC32Combine(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	lengths := []int{0, 1, 2, 3, 7, 8, 255, 256, 4096, 131_071, 3 << 20}
	for _, la := range lengths {
		for _, lb := range lengths {
			a, b := make([]byte, la), make([]byte, lb)
			for i := range a {
				a[i] = byte(r.Uint32())
			}
			for i := range b {
				b[i] = byte(r.Uint32())
			}
			want := crc32.ChecksumIEEE(append(bytes.Clone(a), b...))
			if got := crc32Combine(crc32.ChecksumIEEE(a), crc32.ChecksumIEEE(b), uint64(lb)); got != want {
				t.Fatalf("lengths %d and %d: combined %08x, want %08x", la, lb, got, want)
			}
		}
	}
}

// TestPlainCRC: the xz block's check, combined from the gzip members, is the CRC of the
// plain index; a member whose trailer does not give its chunk's size makes it hash the
// plain bytes instead.
func TestPlainCRC(t *testing.T) {
	stanzas := synthStanzas(300, 9)
	dir := t.TempDir()
	f := mustBuild(t, stanzas, openCache(t, dir), small)
	chunks, _ := layout(stanzas, small.cut(stanzas, mustHashes(t, stanzas)))
	off := 0
	for i := range chunks {
		// The members in f.Gzip, one after the other, as Build compresses them.
		m, err := compressGzipMember(f.Plain[chunks[i].off : chunks[i].off+chunks[i].size])
		if err != nil {
			t.Fatal(err)
		}
		chunks[i].gz.off, chunks[i].gz.size = off, len(m)
		off += len(m)
	}
	if len(chunks) < 5 || off != len(f.Gzip) {
		t.Fatalf("%d chunks, members end at %d of %d", len(chunks), off, len(f.Gzip))
	}
	want := crc32.ChecksumIEEE(f.Plain)
	if got := plainCRC(chunks, f.Gzip, f.Plain); got != want {
		t.Fatalf("plainCRC %08x, want %08x", got, want)
	}
	gz := bytes.Clone(f.Gzip)
	last := &chunks[2].gz
	binary.LittleEndian.PutUint32(gz[last.off+last.size-4:], 1)     // ISIZE
	binary.LittleEndian.PutUint32(gz[last.off+last.size-8:], 0xbad) // CRC
	if got := plainCRC(chunks, gz, f.Plain); got != want {
		t.Fatalf("plainCRC with a member of the wrong size %08x, want %08x", got, want)
	}
}
