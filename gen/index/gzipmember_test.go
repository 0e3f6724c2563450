package index

import (
	"bytes"
	"io"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
)

// TestGzipMemberReused: a member compressed by an encoder taken again from the pool, after
// members of other sizes, is the member a new encoder writes, with gzip -n's header
// (mtime 0, OS Unix): Packages.gz must come out the same whichever encoder wrote it.
func TestGzipMemberReused(t *testing.T) {
	inputs := [][]byte{
		bytes.Repeat([]byte("Package: a\nVersion: 1\n\n"), 20_000),
		[]byte("Package: b\n"),
		nil,
		bytes.Repeat([]byte("Depends: libc6 (>= 2.36)\n"), 3_000),
	}
	fresh := func(plain []byte) []byte {
		var buf bytes.Buffer
		w, err := gzip.NewWriterLevel(&buf, gzipLevel)
		if err != nil {
			t.Fatal(err)
		}
		w.ModTime, w.OS = time.Unix(0, 0), 3
		if _, err := w.Write(plain); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	for round := range 3 {
		for i, plain := range inputs {
			got, err := compressGzipMember(plain)
			if err != nil {
				t.Fatal(err)
			}
			if want := fresh(plain); !bytes.Equal(got, want) {
				t.Errorf("round %d, input %d: %d bytes differ from a new encoder's %d", round, i, len(got), len(want))
			}
			if got[4]|got[5]|got[6]|got[7] != 0 || got[9] != 3 {
				t.Errorf("round %d, input %d: header % x, want mtime 0 and OS 3", round, i, got[:10])
			}
			r, err := gzip.NewReader(bytes.NewReader(got))
			if err != nil {
				t.Fatal(err)
			}
			if back, err := io.ReadAll(r); err != nil || !bytes.Equal(back, plain) {
				t.Errorf("round %d, input %d: decodes to %d bytes (%v), want %d", round, i, len(back), err, len(plain))
			}
		}
	}
}
