package index

import (
	"bytes"
	"fmt"
	"time"

	"github.com/klauspost/compress/gzip"
)

// gzipLevel is the deflate level of every member; Debian's archive uses gzip -9 too.
const gzipLevel = gzip.BestCompression

// compressGzipMember compresses plain into one complete gzip member with a deterministic
// header: no name, no comment, mtime 0, OS "Unix" (as gzip -n writes it).
func compressGzipMember(plain []byte) ([]byte, error) {
	var buf bytes.Buffer
	buf.Grow(len(plain)/4 + 64)
	w, err := gzip.NewWriterLevel(&buf, gzipLevel)
	if err != nil {
		return nil, fmt.Errorf("start gzip encoder: %w", err)
	}
	w.ModTime = time.Unix(0, 0)
	w.OS = 3
	if _, err := w.Write(plain); err != nil {
		return nil, fmt.Errorf("gzip encode: %w", err)
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("gzip encode: %w", err)
	}
	return buf.Bytes(), nil
}
