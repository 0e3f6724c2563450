package index

import (
	"encoding/binary"
	"hash/crc32"
	"hash/crc64"
)

// The xz container (https://tukaani.org/xz/xz-file-format.txt), written by hand because
// apt needs one stream holding several independently compressed blocks, which the xz
// package's writer cannot assemble from cached pieces.

var (
	xzMagic     = []byte{0xfd, '7', 'z', 'X', 'Z', 0x00}
	xzFooterEnd = []byte{'Y', 'Z'}
	// xzFlags are the stream flags: no reserved bits, check type CRC64 (0x04) for every block.
	xzFlags  = []byte{0x00, 0x04}
	crc64Tab = crc64.MakeTable(crc64.ECMA)
)

const (
	xzCheckSize  = 8    // CRC64
	lzma2Filter  = 0x21 // filter ID of LZMA2
	xzHeaderSize = 12   // stream header and stream footer are both 12 bytes
)

// xzBlock is one complete xz block (header, LZMA2 data, padding, check) and the two sizes
// the stream index records for it.
type xzBlock struct {
	data         []byte
	unpadded     uint64 // header + compressed data + check, without the padding
	uncompressed uint64
}

// appendVLI appends x in the xz variable-length integer encoding.
func appendVLI(b []byte, x uint64) []byte {
	for x >= 0x80 {
		b = append(b, byte(x)|0x80)
		x >>= 7
	}
	return append(b, byte(x))
}

// dictSizeByte returns the LZMA2 dictionary-size property byte of the smallest encodable
// dictionary of at least n bytes (at least 4 KiB), and that dictionary size.
func dictSizeByte(n int) (byte, int) {
	for b := byte(0); b < 40; b++ {
		size := (2 | int(b&1)) << (b/2 + 11)
		if size >= n {
			return b, size
		}
	}
	return 40, 0xffffffff
}

// compressXZBlock compresses plain into one xz block with an LZMA2 filter and a CRC64 check.
// Its dictionary is just large enough for the chunk, so decoders need little memory. The
// encoder is armor's own (lzma2.go): ulikunitz/xz's hash-table matcher is greedy and made
// Packages.xz 1.12 times what xz -6 makes of the same chunks, and its binary-tree matcher
// compressed worse still, 14 to 40 times slower (docs/benchmarks.md).
func compressXZBlock(plain []byte) (xzBlock, error) {
	dictByte, _ := dictSizeByte(len(plain))
	return assembleXZBlock(compressLZMA2(plain, lzDepth, lzNice), plain, dictByte), nil
}

// assembleXZBlock wraps raw LZMA2 data of plain into an xz block.
func assembleXZBlock(lz, plain []byte, dictByte byte) xzBlock {
	hdr := make([]byte, 2, 32)
	hdr[1] = 0x40 | 0x80 // one filter; compressed and uncompressed sizes present
	hdr = appendVLI(hdr, uint64(len(lz)))
	hdr = appendVLI(hdr, uint64(len(plain)))
	hdr = append(hdr, lzma2Filter, 1, dictByte)
	for len(hdr)%4 != 0 {
		hdr = append(hdr, 0)
	}
	hdr[0] = byte((len(hdr)+4)/4 - 1)
	hdr = binary.LittleEndian.AppendUint32(hdr, crc32.ChecksumIEEE(hdr))

	data := make([]byte, 0, len(hdr)+len(lz)+3+xzCheckSize)
	data = append(data, hdr...)
	data = append(data, lz...)
	for len(data)%4 != 0 {
		data = append(data, 0)
	}
	data = binary.LittleEndian.AppendUint64(data, crc64.Checksum(plain, crc64Tab))
	return xzBlock{
		data:         data,
		unpadded:     uint64(len(hdr) + len(lz) + xzCheckSize),
		uncompressed: uint64(len(plain)),
	}
}

// xzStreamHeader returns the 12-byte stream header.
func xzStreamHeader() []byte {
	b := append([]byte(nil), xzMagic...)
	b = append(b, xzFlags...)
	return binary.LittleEndian.AppendUint32(b, crc32.ChecksumIEEE(xzFlags))
}

// xzIndexBound is the largest size of the index and footer of a stream of n blocks.
func xzIndexBound(n int) int {
	return 1 + 10 + n*2*10 + 3 + 4 + xzHeaderSize
}

// xzIndexAndFooter returns the stream index recording blocks, followed by the stream footer.
func xzIndexAndFooter(blocks []xzBlock) []byte {
	idx := []byte{0x00} // index indicator
	idx = appendVLI(idx, uint64(len(blocks)))
	for _, b := range blocks {
		idx = appendVLI(idx, b.unpadded)
		idx = appendVLI(idx, b.uncompressed)
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
