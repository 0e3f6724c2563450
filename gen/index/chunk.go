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

// defaultChunking aims at chunks of about 128 KiB of plain text. BenchmarkChunkSize
// measured, for one stanza inserted at a random place (wall time per insert):
//
//	avg (min avg/4, max 4 avg)   10,000   100,000   Packages.gz   Packages.xz (at 100,000)
//	64 KiB                       43 ms    321 ms    20.55 MB      21.00 MB
//	128 KiB                      45 ms    297 ms    19.93 MB      20.87 MB
//	256 KiB                      64 ms    321 ms    19.60 MB      20.95 MB
//
// Small chunks mean more entries to find, read and check, and a worse gzip ratio; large
// ones make the recompressed chunk expensive (the xz encoder compresses about 4–5 MB/s
// here, and a random insertion tends to land in one of the larger chunks). The table
// was measured with the greedy encoder used before, at about 7 MB/s.
var defaultChunking = chunking{min: 32 << 10, avg: 128 << 10, max: 512 << 10}

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
