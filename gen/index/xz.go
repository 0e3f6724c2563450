package index

import (
	"crypto/sha256"
	"encoding/binary"
	"hash/crc32"
)

// The xz container (https://tukaani.org/xz/xz-file-format.txt), written by hand because
// Packages.xz is assembled from cached pieces. The stream holds one block whose LZMA2 data
// is the concatenation of every chunk's own LZMA2 chunks (see compressLZMA2Chunks): the
// first resets the dictionary, each later one resets the coder's state only and refers
// back into the chunk before it, never further. A chunk's compressed bytes therefore
// depend on its plain bytes and its predecessor's, and a change recompresses two chunks,
// while the matches that cross chunk boundaries keep the file near xz's own size (1.14
// times xz -6 on Debian's bookworm main Packages against 1.19 for independent blocks;
// docs/benchmarks.md).
//
// The block check is a CRC32 of the plain index, which hardware computes at memory
// speed: nothing of it needs caching. The block header records neither size, so it
// depends only on the dictionary size.

var (
	xzMagic     = []byte{0xfd, '7', 'z', 'X', 'Z', 0x00}
	xzFooterEnd = []byte{'Y', 'Z'}
	// xzFlags are the stream flags: no reserved bits, check type CRC32 (0x01).
	xzFlags = []byte{0x00, 0x01}
)

const (
	xzCheckSize  = 4    // CRC32
	lzma2Filter  = 0x21 // filter ID of LZMA2
	xzHeaderSize = 12   // stream header and stream footer are both 12 bytes
)

// xzBlock is what the stream index records of a block.
type xzBlock struct {
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

// xzDictSize returns the dictionary size an index's block declares: enough for the longest
// distance a match may reach (a chunk and its predecessor, pairs[i] being the plain size of
// chunks i-1 and i), and no less than the smaller of the whole index and two chunks of the
// largest size the chunking cuts without an oversized stanza, so that it does not change
// with every build of a large index. Decoders allocate it; xz -6 declares 8 MiB.
func xzDictSize(total, maxPair int, ck chunking) byte {
	b, _ := dictSizeByte(max(min(total, 2*ck.max), maxPair))
	return b
}

// xzBlockHeader returns the header of the block: one LZMA2 filter with the dictionary size
// byte dictByte, no sizes.
func xzBlockHeader(dictByte byte) []byte {
	hdr := []byte{0, 0x00, lzma2Filter, 1, dictByte}
	for len(hdr)%4 != 0 {
		hdr = append(hdr, 0)
	}
	hdr[0] = byte((len(hdr)+4)/4 - 1)
	return binary.LittleEndian.AppendUint32(hdr, crc32.ChecksumIEEE(hdr))
}

// xzBlockEnd returns what follows the chunks' LZMA2 data in the block, lz bytes of it after
// a header of hdr bytes: the end marker, the padding and the check of plain (its CRC32).
func xzBlockEnd(hdr, lz int, plainCRC uint32) []byte {
	b := []byte{0x00}
	for (hdr+lz+len(b))%4 != 0 {
		b = append(b, 0)
	}
	return binary.LittleEndian.AppendUint32(b, plainCRC)
}

// xzStreamHeader returns the 12-byte stream header.
func xzStreamHeader() []byte {
	b := append([]byte(nil), xzMagic...)
	b = append(b, xzFlags...)
	return binary.LittleEndian.AppendUint32(b, crc32.ChecksumIEEE(xzFlags))
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

// xzKey is the cache key of a chunk's LZMA2 data: the SHA-256 sums of the plain bytes of
// the chunk before it (zero for the first chunk) and of its own.
func xzKey(prev, sum [32]byte) [32]byte {
	var b [64]byte
	copy(b[:], prev[:])
	copy(b[32:], sum[:])
	return sha256.Sum256(b[:])
}
