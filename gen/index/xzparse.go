package index

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// errXZStream reports an xz file that is not one stream laid out as Build writes it.
var errXZStream = errors.New("not an xz stream as Build writes it")

// parseXZStream returns the LZMA2 data of the one block of b, without its end marker, and
// its offset in b. b must be one xz stream of one block whose headers are head (the stream
// header and block header Build writes for the plain index plain), whose block ends with
// the end marker, padding and check (the CRC32 of plain) as Build writes them, and whose
// index and footer are byte for byte Build's. The LZMA2 data itself is not checked.
func parseXZStream(b, head, plain []byte) (lz []byte, off int, err error) {
	if len(b) < len(head)+xzHeaderSize || !bytes.Equal(b[:xzHeaderSize], head[:xzHeaderSize]) {
		return nil, 0, fmt.Errorf("%w: no stream header", errXZStream)
	}
	if !bytes.Equal(b[xzHeaderSize:len(head)], head[xzHeaderSize:]) {
		return nil, 0, fmt.Errorf("%w: not the block header Build writes for this index", errXZStream)
	}
	backward := binary.LittleEndian.Uint32(b[len(b)-8:])
	indexSize := (uint64(backward) + 1) * 4
	if indexSize > uint64(len(b)-len(head)-xzHeaderSize) {
		return nil, 0, fmt.Errorf("%w: index of %d bytes in a file of %d", errXZStream, indexSize, len(b))
	}
	indexAt := len(b) - xzHeaderSize - int(indexSize)
	idx := b[indexAt : len(b)-xzHeaderSize]
	if idx[0] != 0x00 {
		return nil, 0, fmt.Errorf("%w: no index indicator", errXZStream)
	}
	var count uint64
	var bl xzBlock
	p := idx[1:]
	for _, v := range []*uint64{&count, &bl.unpadded, &bl.uncompressed} {
		if *v, p, err = readVLI(p); err != nil {
			return nil, 0, err
		}
	}
	switch {
	case count != 1:
		return nil, 0, fmt.Errorf("%w: %d blocks", errXZStream, count)
	case bl.uncompressed != uint64(len(plain)):
		return nil, 0, fmt.Errorf("%w: the block holds %d bytes, the plain index %d", errXZStream, bl.uncompressed, len(plain))
	case bl.unpadded < uint64(len(head)-xzHeaderSize+1+xzCheckSize) || (bl.unpadded+3)&^3 != uint64(indexAt-xzHeaderSize):
		return nil, 0, fmt.Errorf("%w: block of %d bytes before an index at %d", errXZStream, bl.unpadded, indexAt)
	case !bytes.Equal(b[indexAt:], xzIndexAndFooter([]xzBlock{bl})):
		return nil, 0, fmt.Errorf("%w: index or footer differs", errXZStream)
	}
	hdr := len(head) - xzHeaderSize
	lzEnd := xzHeaderSize + int(bl.unpadded) - xzCheckSize - 1
	if !bytes.Equal(b[lzEnd:indexAt], xzBlockEnd(hdr, lzEnd-len(head), crc32.ChecksumIEEE(plain))) {
		return nil, 0, fmt.Errorf("%w: the block does not end with the end marker, padding and check of the plain index", errXZStream)
	}
	return b[len(head):lzEnd:lzEnd], len(head), nil
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

// lzSegment is the LZMA2 data of one chunk of the index: lz[start:end] of the block's data,
// decoding to size plain bytes.
type lzSegment struct {
	start, end, size int
}

// errLZMA2 reports LZMA2 data that is not laid out as Build writes it.
var errLZMA2 = errors.New("not LZMA2 data as Build writes it")

// splitLZMA2 cuts the LZMA2 data of a block (without its end marker) at its state resets,
// into the data of each chunk of the index, reading only the LZMA2 chunk headers. The data
// must be as compressLZMA2Chunks writes it: LZMA chunks only, the first resetting the
// dictionary with Build's properties (0xe0), each chunk of the index starting with a state
// reset (0xa0), the others continuing (0x80), and the headers tiling the data exactly.
func splitLZMA2(lz []byte) ([]lzSegment, error) {
	var segs []lzSegment
	for at := 0; at < len(lz); {
		c := lz[at]
		hdr := 5
		switch {
		case c&0xe0 == 0xe0 && at == 0:
			hdr = 6
		case c&0xe0 == 0xa0 && at > 0, c&0xe0 == 0x80 && at > 0:
		default:
			return nil, fmt.Errorf("%w: chunk at %d has control byte %#x", errLZMA2, at, c)
		}
		if len(lz)-at < hdr {
			return nil, fmt.Errorf("%w: truncated chunk header at %d", errLZMA2, at)
		}
		if hdr == 6 && lz[at+5] != lzmaProps {
			return nil, fmt.Errorf("%w: properties %#x, Build writes %#x", errLZMA2, lz[at+5], lzmaProps)
		}
		size := (int(c&0x1f)<<16 | int(binary.BigEndian.Uint16(lz[at+1:]))) + 1
		packed := int(binary.BigEndian.Uint16(lz[at+3:])) + 1
		if packed > len(lz)-at-hdr {
			return nil, fmt.Errorf("%w: chunk at %d runs past the block", errLZMA2, at)
		}
		if c&0xe0 != 0x80 {
			segs = append(segs, lzSegment{start: at, end: at})
		}
		sg := &segs[len(segs)-1]
		at += hdr + packed
		sg.end, sg.size = at, sg.size+size
	}
	return segs, nil
}
