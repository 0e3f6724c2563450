package index

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"testing"
)

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
