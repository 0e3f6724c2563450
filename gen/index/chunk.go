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

// defaultChunking aims at chunks of about 256 KiB of plain text. BenchmarkChunkSize shows
// the trade: smaller chunks make an incremental build cheaper (one chunk's xz is the bulk
// of its cost) and cost compression ratio (a block starts with an empty dictionary).
var defaultChunking = chunking{min: 64 << 10, avg: 256 << 10, max: 1 << 20}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errStanza reports a stanza that cannot be written into an index unchanged.
var errStanza = errors.New("malformed stanza")

// checkStanza returns an error unless s is one non-empty paragraph ending with a newline.
func checkStanza(s []byte) error {
	switch {
	case len(s) == 0:
		return fmt.Errorf("%w: empty", errStanza)
	case s[len(s)-1] != '\n':
		return fmt.Errorf("%w: does not end with a newline", errStanza)
	case s[0] == '\n':
		return fmt.Errorf("%w: starts with a blank line", errStanza)
	case bytes.Contains(s, []byte("\n\n")):
		return fmt.Errorf("%w: contains a blank line", errStanza)
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
	spread := uint64(c.avg - c.min)
	if spread == 0 {
		spread = 1
	}
	size := 0
	for i, s := range stanzas {
		n := len(s) + 1
		size += n
		// P(cut) = n/spread: hash/2^32 < n/spread.
		natural := size >= c.min && uint64(hashes[i])*spread < uint64(n)<<32
		if natural || size >= c.max || i == len(stanzas)-1 {
			ends = append(ends, i+1)
			size = 0
		}
	}
	return ends
}
