package deb

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/ulikunitz/xz/lzma"
)

// control.tar.xz is read with a decoder of its own around ulikunitz/xz's LZMA2
// reader. A general xz reader allocates the dictionary that the stream's filter
// declares (8 MiB for dpkg's default), which costs more than the rest of reading
// a control.tar of a few KiB. Block headers written by dpkg (liblzma) state the
// block's uncompressed size, and no LZMA2 match can reach further back than
// that, so the dictionary is cut down to it. Integrity checks of the blocks are
// skipped: only the control file is needed, and the whole .deb is hashed anyway.

const (
	xzMagic = "\xfd7zXZ\x00"
	// maxXZDict is the largest LZMA2 dictionary accepted: the one "xz -9"
	// uses. Without a limit a bogus header could ask for 4 GiB.
	maxXZDict = 64 << 20
	// lzma2Filter is the filter ID of LZMA2, the only filter dpkg uses.
	lzma2Filter = 0x21
)

// xzReader decodes the blocks of a single xz stream read from an ar member.
type xzReader struct {
	m         *member
	size      int64     // the member's size, to find block padding
	checkSize int       // bytes of the check field after each block
	block     io.Reader // the current block's LZMA2 decoder; nil after the last
}

func newXZReader(m *member) (*xzReader, error) {
	x := &xzReader{m: m, size: m.n}
	var h [12]byte
	if _, err := io.ReadFull(m, h[:]); err != nil {
		return nil, fmt.Errorf("xz stream header: %w", err)
	}
	if string(h[:6]) != xzMagic {
		return nil, errors.New("not an xz stream")
	}
	if crc32.ChecksumIEEE(h[6:8]) != binary.LittleEndian.Uint32(h[8:12]) {
		return nil, errors.New("xz stream header: checksum mismatch")
	}
	if h[6] != 0 || h[7] > 0x0f {
		return nil, fmt.Errorf("xz stream header: unsupported flags %#x %#x", h[6], h[7])
	}
	x.checkSize = xzCheckSize(h[7])
	if err := x.nextBlock(); err != nil {
		return nil, err
	}
	return x, nil
}

// xzCheckSize is the size of a check field by check ID (.xz format 2.1.1.2).
func xzCheckSize(id byte) int {
	if id == 0 {
		return 0
	}
	return 4 << ((id - 1) / 3)
}

func (x *xzReader) Read(p []byte) (int, error) {
	for x.block != nil {
		n, err := x.block.Read(p)
		if err == io.EOF {
			if err := x.endBlock(); err != nil {
				return n, err
			}
			if n == 0 {
				continue
			}
			return n, nil
		}
		return n, err
	}
	return 0, io.EOF
}

// endBlock skips a finished block's padding and check and opens the next block.
func (x *xzReader) endBlock() error {
	pad := (4 - (x.size-x.m.n)%4) % 4
	if err := x.skip(int(pad) + x.checkSize); err != nil {
		return fmt.Errorf("xz block end: %w", err)
	}
	return x.nextBlock()
}

func (x *xzReader) skip(n int) error {
	var b [64]byte
	_, err := io.ReadFull(x.m, b[:n])
	return err
}

// nextBlock reads a block header and opens its LZMA2 decoder, or notes the end
// of the blocks when the index follows.
func (x *xzReader) nextBlock() error {
	var h [1024]byte
	if _, err := io.ReadFull(x.m, h[:1]); err != nil {
		return fmt.Errorf("xz block header: %w", err)
	}
	if h[0] == 0 { // the index: no more blocks
		x.block = nil
		return nil
	}
	n := (int(h[0]) + 1) * 4
	if _, err := io.ReadFull(x.m, h[1:n]); err != nil {
		return fmt.Errorf("xz block header: %w", err)
	}
	if crc32.ChecksumIEEE(h[:n-4]) != binary.LittleEndian.Uint32(h[n-4:n]) {
		return errors.New("xz block header: checksum mismatch")
	}
	dict, uncompressed, err := parseXZBlockHeader(h[:n-4])
	if err != nil {
		return fmt.Errorf("xz block header: %w", err)
	}
	if dict > maxXZDict {
		return fmt.Errorf("xz dictionary of %d bytes exceeds the %d allowed", dict, maxXZDict)
	}
	if uncompressed >= 0 && uncompressed < dict {
		dict = max(uncompressed, lzma.MinDictCap)
	}
	r, err := lzma.Reader2Config{DictCap: int(dict)}.NewReader2(x.m)
	if err != nil {
		return fmt.Errorf("xz block: %w", err)
	}
	x.block = r
	return nil
}

// parseXZBlockHeader returns the LZMA2 dictionary size of a block header (less
// its CRC32) and the uncompressed size it states, or -1 (.xz format 3.1).
func parseXZBlockHeader(h []byte) (dict, uncompressed int64, err error) {
	flags := h[1]
	if flags&0x3c != 0 {
		return 0, 0, fmt.Errorf("reserved flags %#x set", flags)
	}
	if flags&3 != 0 {
		return 0, 0, fmt.Errorf("%d filters; only LZMA2 alone is supported", flags&3+1)
	}
	p := 2
	vli := func() (int64, error) {
		var v uint64
		for i := 0; i < 9 && p < len(h); i++ {
			c := h[p]
			p++
			v |= uint64(c&0x7f) << (7 * i)
			if c&0x80 == 0 {
				if v > 1<<62 {
					break
				}
				return int64(v), nil
			}
		}
		return 0, errors.New("malformed integer")
	}
	uncompressed = -1
	if flags&0x40 != 0 {
		if _, err := vli(); err != nil {
			return 0, 0, err
		}
	}
	if flags&0x80 != 0 {
		if uncompressed, err = vli(); err != nil {
			return 0, 0, err
		}
	}
	id, err := vli()
	if err != nil {
		return 0, 0, err
	}
	size, err := vli()
	if err != nil {
		return 0, 0, err
	}
	if id != lzma2Filter || size != 1 || p >= len(h) {
		return 0, 0, fmt.Errorf("filter %#x with %d property bytes; only LZMA2 is supported", id, size)
	}
	c := h[p] & 0x3f
	if h[p] > 40 {
		return 0, 0, fmt.Errorf("invalid LZMA2 dictionary size code %d", h[p])
	}
	if c == 40 {
		return 1<<32 - 1, uncompressed, nil
	}
	return int64(2|c&1) << (c/2 + 11), uncompressed, nil
}
