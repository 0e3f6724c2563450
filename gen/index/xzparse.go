package index

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
)

// errXZStream reports an xz file that is not one stream laid out as Build writes it.
var errXZStream = errors.New("not an xz stream as Build writes it")

// parseXZStream returns the blocks of b as its stream index lists them (their data is not
// set). b must be one xz stream of CRC64-checked blocks with no stream padding, whose
// header, index and footer are byte for byte what xzStreamHeader and xzIndexAndFooter
// write for those blocks, and whose blocks fill the space between header and index. The
// blocks themselves are not checked.
func parseXZStream(b []byte) ([]xzBlock, error) {
	if len(b) < 2*xzHeaderSize || !bytes.Equal(b[:xzHeaderSize], xzStreamHeader()) {
		return nil, fmt.Errorf("%w: no stream header", errXZStream)
	}
	backward := binary.LittleEndian.Uint32(b[len(b)-8:])
	indexSize := (uint64(backward) + 1) * 4
	if indexSize > uint64(len(b)-2*xzHeaderSize) {
		return nil, fmt.Errorf("%w: index of %d bytes in a file of %d", errXZStream, indexSize, len(b))
	}
	indexAt := len(b) - xzHeaderSize - int(indexSize)
	idx := b[indexAt : len(b)-xzHeaderSize]
	if idx[0] != 0x00 {
		return nil, fmt.Errorf("%w: no index indicator", errXZStream)
	}
	p := idx[1:]
	count, p, err := readVLI(p)
	if err != nil {
		return nil, err
	}
	if count > uint64(len(p)/2) { // each record is at least two bytes
		return nil, fmt.Errorf("%w: %d blocks in an index of %d bytes", errXZStream, count, len(idx))
	}
	blocks := make([]xzBlock, count)
	end := uint64(xzHeaderSize)
	for i := range blocks {
		bl := &blocks[i]
		if bl.unpadded, p, err = readVLI(p); err != nil {
			return nil, err
		}
		if bl.uncompressed, p, err = readVLI(p); err != nil {
			return nil, err
		}
		if bl.unpadded < 8+xzCheckSize || bl.unpadded > uint64(indexAt) {
			return nil, fmt.Errorf("%w: block %d: unpadded size %d", errXZStream, i, bl.unpadded)
		}
		end += (bl.unpadded + 3) &^ 3
	}
	if end != uint64(indexAt) {
		return nil, fmt.Errorf("%w: blocks end at %d, the index starts at %d", errXZStream, end, indexAt)
	}
	if !bytes.Equal(b[indexAt:], xzIndexAndFooter(blocks)) {
		return nil, fmt.Errorf("%w: index or footer differs", errXZStream)
	}
	return blocks, nil
}

// readVLI reads one xz variable-length integer (at most nine bytes) from the start of p
// and returns it and the rest of p. The encoding is checked when the index is written
// afresh and compared.
func readVLI(p []byte) (uint64, []byte, error) {
	var x uint64
	for i := 0; i < 9 && i < len(p); i++ {
		x |= uint64(p[i]&0x7f) << (7 * i)
		if p[i]&0x80 == 0 {
			return x, p[i+1:], nil
		}
	}
	return 0, nil, fmt.Errorf("%w: truncated or overlong number in the index", errXZStream)
}
