package store

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"testing"
	"testing/iotest"
)

// FuzzVerifier checks that the verifier passes on data whole exactly when it has the
// declared size and digest, and otherwise never hands out the complete declared size.
func FuzzVerifier(f *testing.F) {
	f.Add([]byte("hello"), []byte("hello"), int64(0), false)
	f.Add([]byte("hello"), []byte("hellO"), int64(0), true)
	f.Add([]byte(""), []byte(""), int64(0), false)
	f.Add([]byte("hello"), []byte("hello!"), int64(-1), true)
	f.Add([]byte("hello"), []byte("hell"), int64(1), false)
	f.Fuzz(func(t *testing.T, want, data []byte, sizeDelta int64, oneByte bool) {
		h := sha256.Sum256(want)
		sum := hex.EncodeToString(h[:])
		size := int64(len(want)) + sizeDelta%4
		if size < 0 {
			size = 0
		}
		var r io.Reader = bytes.NewReader(data)
		if oneByte {
			r = iotest.OneByteReader(r)
		}
		v := newVerifier(r, sum, size)
		got, err := io.ReadAll(v)
		match := bytes.Equal(data, want) && size == int64(len(want))
		if match {
			if err != nil || !bytes.Equal(got, data) || v.Verify() != nil {
				t.Fatalf("matching data: read %d bytes, err %v", len(got), err)
			}
			return
		}
		if !errors.Is(err, ErrDigestMismatch) || !errors.Is(v.Verify(), ErrDigestMismatch) {
			t.Fatalf("mismatching data (size %d, %d bytes): err %v", size, len(data), err)
		}
		if int64(len(got)) >= size && size > 0 {
			t.Fatalf("mismatching data: handed out %d of %d declared bytes", len(got), size)
		}
	})
}

func TestValidDigest(t *testing.T) {
	good := "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
	tests := []struct {
		name string
		sum  string
		want bool
	}{
		{"valid", good, true},
		{"empty", "", false},
		{"uppercase", "E3B0C44298FC1C149AFBF4C8996FB92427AE41E4649B934CA495991B7852B855", false},
		{"short", good[:63], false},
		{"long", good + "0", false},
		{"slash", "e3/0" + good[4:], false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := ValidDigest(tc.sum); got != tc.want {
				t.Errorf("ValidDigest(%q) = %v, want %v", tc.sum, got, tc.want)
			}
		})
	}
}
