package xz

import (
	"encoding/binary"
	"hash/crc32"
)

// The xz container (https://tukaani.org/xz/xz-file-format.txt): one stream of blocks, each
// of one LZMA2 filter, with a CRC-32 check. The pieces are separate functions because a
// caller that assembles a block from cached LZMA2 data writes the headers, the block's end
// and the index around data it did not compress in one go. The block header records
// neither size, so it depends only on the dictionary size.

var (
	xzMagic     = []byte{0xfd, '7', 'z', 'X', 'Z', 0x00}
	xzFooterEnd = []byte{'Y', 'Z'}
	// xzFlags are the stream flags: no reserved bits, check type CRC32 (0x01).
	xzFlags = []byte{0x00, 0x01}
)

const (
	// CheckSize is the size of a block's check (CRC-32).
	CheckSize = 4
	// HeaderSize is the size of the stream header, and of the stream footer.
	HeaderSize = 12

	lzma2Filter = 0x21 // filter ID of LZMA2
)

// Block is what the stream index records of a block.
type Block struct {
	Unpadded     uint64 // header + compressed data + check, without the padding
	Uncompressed uint64
}

// appendVLI appends x in the xz variable-length integer encoding.
func appendVLI(b []byte, x uint64) []byte {
	for x >= 0x80 {
		b = append(b, byte(x)|0x80)
		x >>= 7
	}
	return append(b, byte(x))
}

// DictSizeByte returns the LZMA2 dictionary-size property byte of the smallest encodable
// dictionary of at least n bytes (at least 4 KiB), and that dictionary size.
func DictSizeByte(n int) (byte, int) {
	for b := byte(0); b < 40; b++ {
		size := (2 | int(b&1)) << (b/2 + 11)
		if size >= n {
			return b, size
		}
	}
	return 40, 0xffffffff
}

// BlockHeader returns the header of a block: one LZMA2 filter with the dictionary-size
// byte dictByte (DictSizeByte), no sizes.
func BlockHeader(dictByte byte) []byte {
	hdr := []byte{0, 0x00, lzma2Filter, 1, dictByte}
	for len(hdr)%4 != 0 {
		hdr = append(hdr, 0)
	}
	hdr[0] = byte((len(hdr)+4)/4 - 1)
	return binary.LittleEndian.AppendUint32(hdr, crc32.ChecksumIEEE(hdr))
}

// BlockEnd returns what follows a block's LZMA2 data, lz bytes of it after a header of hdr
// bytes: the end marker, the padding and the check, plainCRC (the CRC-32 of the block's
// plain bytes).
func BlockEnd(hdr, lz int, plainCRC uint32) []byte {
	b := []byte{0x00}
	for (hdr+lz+len(b))%4 != 0 {
		b = append(b, 0)
	}
	return binary.LittleEndian.AppendUint32(b, plainCRC)
}

// StreamHeader returns the 12-byte stream header.
func StreamHeader() []byte {
	b := append([]byte(nil), xzMagic...)
	b = append(b, xzFlags...)
	return binary.LittleEndian.AppendUint32(b, crc32.ChecksumIEEE(xzFlags))
}

// IndexAndFooter returns the stream index recording blocks, followed by the stream footer.
func IndexAndFooter(blocks []Block) []byte {
	idx := []byte{0x00} // index indicator
	idx = appendVLI(idx, uint64(len(blocks)))
	for _, b := range blocks {
		idx = appendVLI(idx, b.Unpadded)
		idx = appendVLI(idx, b.Uncompressed)
	}
	for len(idx)%4 != 0 {
		idx = append(idx, 0)
	}
	idx = binary.LittleEndian.AppendUint32(idx, crc32.ChecksumIEEE(idx))

	foot := binary.LittleEndian.AppendUint32(nil, uint32(len(idx)/4-1)) // backward size
	foot = append(foot, xzFlags...)
	out := idx
	out = binary.LittleEndian.AppendUint32(out, crc32.ChecksumIEEE(foot))
	out = append(out, foot...)
	return append(out, xzFooterEnd...)
}
