package xz

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// ErrStream reports an xz file that is not one stream laid out as this package writes it.
var ErrStream = errors.New("not an xz stream as armor writes it")

// ParseStream returns the LZMA2 data of the one block of b, without its end marker, and
// its offset in b. b must be one xz stream of one block that decodes to plain, laid out as
// this package writes one: its headers are head (StreamHeader and BlockHeader), its block
// ends as BlockEnd says (the end marker, padding and the CRC-32 of plain), and its index
// and footer are byte for byte IndexAndFooter's. The LZMA2 data itself is not checked
// (CheckLZMA2 does that). Any other layout is an error wrapping ErrStream.
func ParseStream(b, head, plain []byte) (lz []byte, off int, err error) {
	if len(b) < len(head)+HeaderSize || !bytes.Equal(b[:HeaderSize], head[:HeaderSize]) {
		return nil, 0, fmt.Errorf("%w: no stream header", ErrStream)
	}
	if !bytes.Equal(b[HeaderSize:len(head)], head[HeaderSize:]) {
		return nil, 0, fmt.Errorf("%w: not the expected block header", ErrStream)
	}
	backward := binary.LittleEndian.Uint32(b[len(b)-8:])
	indexSize := (uint64(backward) + 1) * 4
	if indexSize > uint64(len(b)-len(head)-HeaderSize) {
		return nil, 0, fmt.Errorf("%w: index of %d bytes in a file of %d", ErrStream, indexSize, len(b))
	}
	indexAt := len(b) - HeaderSize - int(indexSize)
	idx := b[indexAt : len(b)-HeaderSize]
	if idx[0] != 0x00 {
		return nil, 0, fmt.Errorf("%w: no index indicator", ErrStream)
	}
	var count uint64
	var bl Block
	p := idx[1:]
	for _, v := range []*uint64{&count, &bl.Unpadded, &bl.Uncompressed} {
		if *v, p, err = readVLI(p); err != nil {
			return nil, 0, err
		}
	}
	switch {
	case count != 1:
		return nil, 0, fmt.Errorf("%w: %d blocks", ErrStream, count)
	case bl.Uncompressed != uint64(len(plain)):
		return nil, 0, fmt.Errorf("%w: the block holds %d bytes, the plain index %d", ErrStream, bl.Uncompressed, len(plain))
	case bl.Unpadded < uint64(len(head)-HeaderSize+1+CheckSize) || (bl.Unpadded+3)&^3 != uint64(indexAt-HeaderSize):
		return nil, 0, fmt.Errorf("%w: block of %d bytes before an index at %d", ErrStream, bl.Unpadded, indexAt)
	case !bytes.Equal(b[indexAt:], IndexAndFooter([]Block{bl})):
		return nil, 0, fmt.Errorf("%w: index or footer differs", ErrStream)
	}
	hdr := len(head) - HeaderSize
	lzEnd := HeaderSize + int(bl.Unpadded) - CheckSize - 1
	if !bytes.Equal(b[lzEnd:indexAt], BlockEnd(hdr, lzEnd-len(head), crc32.ChecksumIEEE(plain))) {
		return nil, 0, fmt.Errorf("%w: the block does not end with the end marker, padding and check of the plain index", ErrStream)
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
	return 0, nil, fmt.Errorf("%w: truncated or overlong number in the index", ErrStream)
}

// Segment is the LZMA2 data that one call of EncodeLZMA2 wrote, as SplitLZMA2 finds it in a
// block: lz[Start:End] of the block's data, decoding to Size plain bytes.
type Segment struct {
	Start, End, Size int
}

// ErrLZMA2 reports LZMA2 data that is not laid out as EncodeLZMA2 writes it.
var ErrLZMA2 = errors.New("not LZMA2 data as armor writes it")

// SplitLZMA2 cuts the LZMA2 data of a block (without its end marker) at its state resets,
// into the data of each call of EncodeLZMA2 that wrote it, reading only the LZMA2 chunk
// headers. The data must be as EncodeLZMA2 writes it: LZMA chunks only, the first
// resetting the dictionary with Props (0xe0), each call's first chunk resetting the state
// (0xa0), the others continuing (0x80), and the headers tiling the data exactly. Anything
// else is an error wrapping ErrLZMA2.
func SplitLZMA2(lz []byte) ([]Segment, error) {
	var segs []Segment
	for at := 0; at < len(lz); {
		c := lz[at]
		hdr := 5
		switch {
		case c&0xe0 == 0xe0 && at == 0:
			hdr = 6
		case c&0xe0 == 0xa0 && at > 0, c&0xe0 == 0x80 && at > 0:
		default:
			return nil, fmt.Errorf("%w: chunk at %d has control byte %#x", ErrLZMA2, at, c)
		}
		if len(lz)-at < hdr {
			return nil, fmt.Errorf("%w: truncated chunk header at %d", ErrLZMA2, at)
		}
		if hdr == 6 && lz[at+5] != Props {
			return nil, fmt.Errorf("%w: properties %#x, want %#x", ErrLZMA2, lz[at+5], Props)
		}
		size := (int(c&0x1f)<<16 | int(binary.BigEndian.Uint16(lz[at+1:]))) + 1
		packed := int(binary.BigEndian.Uint16(lz[at+3:])) + 1
		if packed > len(lz)-at-hdr {
			return nil, fmt.Errorf("%w: chunk at %d runs past the block", ErrLZMA2, at)
		}
		if c&0xe0 != 0x80 {
			segs = append(segs, Segment{Start: at, End: at})
		}
		sg := &segs[len(segs)-1]
		at += hdr + packed
		sg.End, sg.Size = at, sg.Size+size
	}
	return segs, nil
}
