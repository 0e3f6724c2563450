package index

import (
	"crypto/sha256"
	"encoding/binary"
	"hash/crc32"

	"github.com/armor-apt/armor/gen/xz"
)

// Packages.xz is one xz stream of one block, assembled from cached pieces: the block's
// LZMA2 data is the concatenation of every chunk's own LZMA2 data (xz.EncodeLZMA2), the
// first resetting the dictionary, each later one resetting the coder's state only and
// referring back into the chunk before it, never further. A chunk's compressed bytes
// therefore depend on its plain bytes and its predecessor's, and a change recompresses two
// chunks, while the matches that cross chunk boundaries keep the file near xz's own size
// (docs/benchmarks.md compares it with xz -6 and with independent blocks).
//
// The block's check is the CRC-32 of the plain index, combined from the gzip members'
// CRC-32s (plainCRC): nothing of it needs caching.

// xzDictSize returns the dictionary size an index's block declares: enough for the longest
// distance a match may reach (a chunk and its predecessor, maxPair being the largest plain
// size of a chunk and its predecessor), and no less than the smaller of the whole index and
// two chunks of the largest size the chunking cuts without an oversized stanza, so that it
// does not change with every build of a large index. Decoders allocate it; xz -6 declares
// 8 MiB.
func xzDictSize(total, maxPair int, ck chunking) byte {
	b, _ := xz.DictSizeByte(max(min(total, 2*ck.max), maxPair))
	return b
}

// xzKey is the cache key of a chunk's LZMA2 data: the SHA-256 sums of the plain bytes of
// the chunk before it (zero for the first chunk) and of its own.
func xzKey(prev, sum [32]byte) [32]byte {
	var b [64]byte
	copy(b[:], prev[:])
	copy(b[32:], sum[:])
	return sha256.Sum256(b[:])
}

// xzHeadOf returns the stream header and block header of an index of chunks, total plain
// bytes in all.
func xzHeadOf(chunks []chunk, total int, ck chunking) []byte {
	maxPair := 0
	for i := range chunks {
		maxPair = max(maxPair, chunks[i].off+chunks[i].size-chunks[i].prevOff)
	}
	return append(xz.StreamHeader(), xz.BlockHeader(xzDictSize(total, maxPair, ck))...)
}

// xzTailBound is the most finishXZ appends: the end marker, padding, check, an index of one
// block and the stream footer.
const xzTailBound = 8 + 4 + 1 + 1 + 2*10 + 3 + 4 + xz.HeaderSize

// finishXZ ends the block of the xz stream (its headers, the block header hdr bytes long,
// and the chunks' LZMA2 data) of a plain index of size bytes whose CRC-32 is crc, and
// appends the stream index and footer.
func finishXZ(stream []byte, hdr, size int, crc uint32) []byte {
	lz := len(stream) - xz.HeaderSize - hdr
	stream = append(stream, xz.BlockEnd(hdr, lz, crc)...)
	block := xz.Block{Unpadded: uint64(hdr + lz + 1 + xz.CheckSize), Uncompressed: uint64(size)}
	return append(stream, xz.IndexAndFooter([]xz.Block{block})...)
}

// plainCRC returns the CRC-32 of the plain index of chunks, from the trailers of their
// gzip members in gz: each member's CRC-32 and size (ISIZE). A trailer whose size is not
// its chunk's (which no member Build writes or takes from its cache has) makes it hash
// plain instead.
func plainCRC(chunks []chunk, gz, plain []byte) uint32 {
	var crc uint32
	for i := range chunks {
		ch := &chunks[i]
		end := ch.gz.off + ch.gz.size
		if ch.gz.size < 18 || binary.LittleEndian.Uint32(gz[end-4:]) != uint32(ch.size) {
			return crc32.ChecksumIEEE(plain)
		}
		crc = xz.CRC32Combine(crc, binary.LittleEndian.Uint32(gz[end-8:]), uint64(ch.size))
	}
	return crc
}
