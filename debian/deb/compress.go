package deb

import (
	"io"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// maxWindow bounds the window a zstd frame may ask for, as maxXZDict (the
// dictionary of "xz -9") does for xz.
const maxWindow = 64 << 20

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
		zstd.WithDecoderMaxWindow(maxWindow),
		zstd.WithDecoderMaxMemory(maxControlTar))
}

func putZstd(d *zstd.Decoder) {
	if d.Reset(nil) == nil {
		zstdDecoders.Put(d)
	}
}
