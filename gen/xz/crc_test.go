package xz

import (
	"bytes"
	"hash/crc32"
	"math/rand/v2"
	"testing"
)

// TestCRC32Combine: the combined CRC of two pieces is the CRC of both, for pieces of
// every length from none to a few MB.
func TestCRC32Combine(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	lengths := []int{0, 1, 2, 3, 7, 8, 255, 256, 4096, 131_071, 3 << 20}
	for _, la := range lengths {
		for _, lb := range lengths {
			a, b := make([]byte, la), make([]byte, lb)
			for i := range a {
				a[i] = byte(r.Uint32())
			}
			for i := range b {
				b[i] = byte(r.Uint32())
			}
			want := crc32.ChecksumIEEE(append(bytes.Clone(a), b...))
			if got := CRC32Combine(crc32.ChecksumIEEE(a), crc32.ChecksumIEEE(b), uint64(lb)); got != want {
				t.Fatalf("lengths %d and %d: combined %08x, want %08x", la, lb, got, want)
			}
		}
	}
}
