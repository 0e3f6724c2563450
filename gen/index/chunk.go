package index

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
)

// chunking says where chunks of the plain index end. A chunk ends after a stanza when the
// chunk has reached min bytes and the stanza's own hash falls under a threshold
// proportional to the stanza's length (so the expected chunk size in bytes does not depend
// on how long stanzas are), or when the chunk has reached max bytes. The decision reads
// only the stanza and the running size of its chunk, so an inserted or removed stanza
// moves at most the boundaries up to the next one that resynchronises, typically one or
// two chunks.
type chunking struct {
	min, avg, max int // plain bytes; avg is the expected size of a chunk without a forced cut
}

// defaultChunking aims at chunks of about 128 KiB of plain text, between 96 and 256 KiB.
// A random insertion lands in a chunk with a probability proportional to its size, so the
// chunk it recompresses is on average E[size²]/E[size], not E[size]: the narrower the
// sizes range, the cheaper a change. BenchmarkChunkSize and BenchmarkDebianXZBlocks
// compare the shapes (docs/benchmarks.md has their figures): 96–128–256 KiB costs a
// random insertion less than 32–128–512 and 64–128–256 for the same Packages.xz size,
// and 80–112–224 less again for a larger one.
//
// Small chunks mean more entries to find, read and check, a worse gzip ratio and, for
// xz, a state reset every chunk and less of the previous chunk to match into; large ones
// make the recompressed chunks expensive (the xz encoder is the slowest step of a build).
// A high minimum keeps resynchronisation: an insertion of δ bytes moves a chunk's end
// only when a stanza within δ of where the chunk reached min qualifies, a chance of about
// δ/(avg-min), and the compressed chunks per insertion stayed at 3.2 against 3.0.
var defaultChunking = chunking{min: 96 << 10, avg: 128 << 10, max: 256 << 10}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrStanza reports a stanza that cannot be written into an index unchanged.
var ErrStanza = errors.New("malformed stanza")

// checkStanza returns an error unless s is one non-empty paragraph ending with a newline.
func checkStanza(s []byte) error {
	switch {
	case len(s) == 0:
		return fmt.Errorf("%w: empty", ErrStanza)
	case s[len(s)-1] != '\n':
		return fmt.Errorf("%w: does not end with a newline", ErrStanza)
	case s[0] == '\n':
		return fmt.Errorf("%w: starts with a blank line", ErrStanza)
	case bytes.Contains(s, []byte("\n\n")):
		return fmt.Errorf("%w: contains a blank line", ErrStanza)
	}
	return nil
}

// stanzaHash is the content hash the chunk boundary decision reads: CRC-32C (hardware
// accelerated) with a final avalanche so that every bit depends on every input bit.
func stanzaHash(s []byte) uint32 {
	h := crc32.Checksum(s, castagnoli)
	h ^= h >> 16
	h *= 0x85ebca6b
	h ^= h >> 13
	h *= 0xc2b2ae35
	h ^= h >> 16
	return h
}

// cut returns the end of each chunk as an index one past its last stanza. hashes[i] is
// stanzaHash(stanzas[i]). Each stanza occupies len+1 bytes of the index (its blank line).
func (c chunking) cut(stanzas [][]byte, hashes []uint32) []int {
	var ends []int
	size := 0
	for i, s := range stanzas {
		n := len(s) + 1
		size += n
		if c.cutAfter(size, n, hashes[i]) || i == len(stanzas)-1 {
			ends = append(ends, i+1)
			size = 0
		}
	}
	return ends
}

// cutAfter reports whether a chunk of size bytes ends after its last stanza, of n bytes
// (with its blank line) and whose stanzaHash is h. The last stanza of the index ends its
// chunk whatever cutAfter says.
func (c chunking) cutAfter(size, n int, h uint32) bool {
	spread := uint64(max(c.avg-c.min, 1))
	// P(cut) = n/spread: hash/2^32 < n/spread.
	natural := size >= c.min && uint64(h)*spread < uint64(n)<<32
	return natural || size >= c.max
}
