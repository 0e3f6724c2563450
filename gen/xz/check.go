package xz

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/ulikunitz/xz/lzma"
)

// CheckLZMA2 checks that lz, the LZMA2 data of one call of EncodeLZMA2 as SplitLZMA2 cut it
// out of a block, decodes to plain[start:] when plain[:start] alone is in the dictionary,
// so that it may follow plain[:start] in any block. It decodes with ulikunitz/xz (a
// decoder written independently of this encoder): the decoder is given plain[:start] as
// uncompressed LZMA2 chunks, then lz with its first control byte asking for the properties
// the uncompressed chunks did not set (0xc0 instead of 0xa0), then an end marker. A match
// reaching before plain[:start] fails the decoder's distance check.
func CheckLZMA2(lz, plain []byte, start int) error {
	in := make([]byte, 0, start+start/(1<<16)*3+3+len(lz)+2)
	for p := plain[:start]; len(p) > 0; {
		n := min(len(p), 1<<16)
		ctl := byte(0x02) // uncompressed, no dictionary reset
		if len(in) == 0 {
			ctl = 0x01
		}
		in = append(in, ctl, byte((n-1)>>8), byte(n-1))
		in = append(in, p[:n]...)
		p = p[n:]
	}
	switch {
	case start == 0:
		in = append(in, lz...)
	case len(lz) < 5:
		return errors.New("lzma2: truncated chunk header")
	default:
		in = append(in, lz[0]&0x1f|0xc0, lz[1], lz[2], lz[3], lz[4], Props)
		in = append(in, lz[5:]...)
	}
	in = append(in, 0x00)
	_, dictCap := DictSizeByte(len(plain))
	br := bytes.NewReader(in)
	r, err := lzma.Reader2Config{DictCap: dictCap}.NewReader2(br)
	if err != nil {
		return fmt.Errorf("lzma2: %w", err)
	}
	w := &sameWriter{want: plain}
	_, err = io.CopyBuffer(w, r, make([]byte, 32<<10))
	switch {
	case err != nil:
		return fmt.Errorf("lzma2: %w", err)
	case w.n != len(plain):
		return fmt.Errorf("decompresses to %d bytes, its chunk has %d", w.n-start, len(plain)-start)
	case br.Len() != 0:
		return fmt.Errorf("lzma2: %d bytes after the end of its data", br.Len())
	}
	return nil
}

// sameWriter takes bytes that must be the next of want, and fails with the first that are
// not, so a decoder's output is checked as it comes, never held whole.
type sameWriter struct {
	want []byte
	n    int // bytes checked so far
}

func (w *sameWriter) Write(p []byte) (int, error) {
	if len(p) > len(w.want)-w.n {
		return 0, errors.New("decompresses to more than the plain data holds")
	}
	if !bytes.Equal(p, w.want[w.n:w.n+len(p)]) {
		return 0, errors.New("decompresses to other bytes than the plain data")
	}
	w.n += len(p)
	return len(p), nil
}
