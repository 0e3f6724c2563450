package deb

import (
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"
)

// maxXZDict is the largest LZMA2 dictionary accepted in control.tar.xz, the one
// "xz -9" uses. The xz decoder allocates the dictionary the stream declares before
// reading any data, so a bogus header could otherwise ask for 4 GiB.
const maxXZDict = 64 << 20

// newXZReader opens an xz stream after checking the dictionary size its first
// block declares.
func newXZReader(m *member) (io.Reader, error) {
	prefix, _ := m.br.Peek(int(min(m.n, 12+1024)))
	if dict, ok := xzDictSize(prefix); ok && dict > maxXZDict {
		return nil, fmt.Errorf("xz dictionary of %d bytes exceeds the %d allowed", dict, maxXZDict)
	}
	return xz.ReaderConfig{SingleStream: true}.NewReader(m)
}

// xzDictSize reads the LZMA2 dictionary size from the first block header of an
// xz stream (see the .xz file format, sections 2.1.1 and 3.1), if it can.
func xzDictSize(b []byte) (int64, bool) {
	if len(b) < 13 || string(b[:6]) != "\xfd7zXZ\x00" || b[12] == 0 {
		return 0, false
	}
	hs := (int(b[12]) + 1) * 4
	if len(b) < 12+hs {
		return 0, false
	}
	h := b[12 : 12+hs]
	flags := h[1]
	p := 2
	vli := func() (uint64, bool) {
		var v uint64
		for i := 0; i < 9 && p < len(h); i++ {
			c := h[p]
			p++
			v |= uint64(c&0x7f) << (7 * i)
			if c&0x80 == 0 {
				return v, true
			}
		}
		return 0, false
	}
	for _, present := range []bool{flags&0x40 != 0, flags&0x80 != 0} {
		if present {
			if _, ok := vli(); !ok {
				return 0, false
			}
		}
	}
	for range int(flags&3) + 1 {
		id, ok1 := vli()
		n, ok2 := vli()
		if !ok1 || !ok2 || n > uint64(len(h)-p) {
			return 0, false
		}
		props := h[p : p+int(n)]
		p += int(n)
		if id == 0x21 && len(props) == 1 {
			c := props[0] & 0x3f
			if c >= 40 {
				return 1<<32 - 1, true
			}
			return int64(2|c&1) << (c/2 + 11), true
		}
	}
	return 0, false
}

// Zstandard decoders are pooled: each allocates sizeable tables. With a
// concurrency of one they decode synchronously and start no goroutines, so an
// abandoned stream leaks nothing.
var zstdDecoders sync.Pool

func getZstd(r io.Reader) (*zstd.Decoder, error) {
	if d, ok := zstdDecoders.Get().(*zstd.Decoder); ok {
		if err := d.Reset(r); err != nil {
			return nil, err
		}
		return d, nil
	}
	return zstd.NewReader(r,
		zstd.WithDecoderConcurrency(1),
		zstd.WithDecoderLowmem(true),
		zstd.WithDecoderMaxWindow(maxXZDict),
		zstd.WithDecoderMaxMemory(maxControlTar))
}

func putZstd(d *zstd.Decoder) {
	if d.Reset(nil) == nil {
		zstdDecoders.Put(d)
	}
}
