package xz

import (
	"bytes"
	"errors"
	"hash/crc32"
	"testing"
)

// stream returns an xz stream of one block holding plain, laid out as ParseStream expects,
// and its head (stream header and block header).
func stream(plain []byte) (b, head []byte) {
	dict, _ := DictSizeByte(len(plain))
	head = append(StreamHeader(), BlockHeader(dict)...)
	lz := EncodeLZMA2(plain, 0, DefaultEffort)
	b = append(bytes.Clone(head), lz...)
	hdr := len(head) - HeaderSize
	b = append(b, BlockEnd(hdr, len(lz), crc32.ChecksumIEEE(plain))...)
	block := Block{Unpadded: uint64(hdr + len(lz) + 1 + CheckSize), Uncompressed: uint64(len(plain))}
	return append(b, IndexAndFooter([]Block{block})...), head
}

// TestParseStream: a stream laid out as this package writes it gives back its LZMA2 data,
// which CheckLZMA2 accepts; one byte changed anywhere in the framing is refused.
func TestParseStream(t *testing.T) {
	plain := lzma2Inputs()["text"][:40<<10]
	b, head := stream(plain)
	lz, off, err := ParseStream(b, head, plain)
	if err != nil {
		t.Fatal(err)
	}
	if off != len(head) || !bytes.Equal(lz, EncodeLZMA2(plain, 0, DefaultEffort)) {
		t.Fatalf("LZMA2 data at %d, %d bytes: not what was encoded", off, len(lz))
	}
	if err := CheckLZMA2(lz, plain, 0); err != nil {
		t.Fatal(err)
	}
	for _, at := range []int{0, 7, HeaderSize + 2, off + len(lz), len(b) - 20, len(b) - 9, len(b) - 1} {
		bad := bytes.Clone(b)
		bad[at] ^= 0x40
		if _, _, err := ParseStream(bad, head, plain); !errors.Is(err, ErrStream) {
			t.Errorf("byte %d of %d changed: err %v, want ErrStream", at, len(b), err)
		}
	}
}

// FuzzParseStream gives ParseStream arbitrary bytes, as the seeding of an index cache
// gives it a Packages.xz fetched from a store: it never panics, and what it accepts is a
// stream that this package's own pieces rebuild byte for byte around the data it returns.
func FuzzParseStream(f *testing.F) {
	plain := lzma2Inputs()["text"][:8<<10]
	b, _ := stream(plain)
	f.Add(b, 0)
	f.Add(b[:len(b)-1], 0)
	f.Add(append(StreamHeader(), IndexAndFooter([]Block{{Unpadded: 1 << 62}})...), 0)
	f.Fuzz(func(t *testing.T, b []byte, cut int) {
		p := plain[:min(max(cut, 0), len(plain))]
		dict, _ := DictSizeByte(len(p))
		head := append(StreamHeader(), BlockHeader(dict)...)
		lz, off, err := ParseStream(b, head, p)
		if err != nil {
			if !errors.Is(err, ErrStream) {
				t.Fatalf("error %v does not wrap ErrStream", err)
			}
			return
		}
		hdr := len(head) - HeaderSize
		again := append(bytes.Clone(head), lz...)
		again = append(again, BlockEnd(hdr, len(lz), crc32.ChecksumIEEE(p))...)
		block := Block{Unpadded: uint64(hdr + len(lz) + 1 + CheckSize), Uncompressed: uint64(len(p))}
		again = append(again, IndexAndFooter([]Block{block})...)
		if off != len(head) || !bytes.Equal(again, b) {
			t.Fatalf("accepted a stream that its pieces do not rebuild")
		}
	})
}
