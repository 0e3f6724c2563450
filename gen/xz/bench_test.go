package xz

import (
	"bytes"
	"fmt"
	"hash/crc32"
	"os/exec"
	"testing"
)

// BenchmarkEncodeLZMA2 compresses 1 MiB of Packages text at several efforts, DefaultEffort
// among them, and reports the output's size beside `xz --format=raw --lzma2=preset=6` of the
// same bytes (x-xz6): the trade DefaultEffort was chosen by (docs/benchmarks.md).
//
//	go test ./gen/xz -run '^$' -bench EncodeLZMA2 -benchtime 3x
func BenchmarkEncodeLZMA2(b *testing.B) {
	text := lzma2Inputs()["text"]
	for len(text) < 1<<20 {
		text = append(text, text...)
	}
	text = text[:1<<20]
	cmd := exec.Command("xz", "--format=raw", "--lzma2=preset=6", "-c")
	cmd.Stdin = bytes.NewReader(text)
	ref, err := cmd.Output()
	if err != nil {
		b.Fatalf("xz -6 (install xz-utils): %v", err)
	}
	for _, eff := range []Effort{{Depth: 4, Nice: 8}, {Depth: 16, Nice: 16}, DefaultEffort, {Depth: 32, Nice: 64}} {
		b.Run(fmt.Sprintf("depth=%d/nice=%d", eff.Depth, eff.Nice), func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			var lz []byte
			for b.Loop() {
				lz = EncodeLZMA2(text, 0, eff)
			}
			b.ReportMetric(float64(len(lz))/float64(len(ref)), "x-xz6")
		})
	}
}

// BenchmarkEncodeLZMA2Primed compresses a 128 KiB piece of Packages text after the piece
// before it, as index assembly compresses a chunk after its predecessor.
func BenchmarkEncodeLZMA2Primed(b *testing.B) {
	text := lzma2Inputs()["text"][:256<<10]
	b.SetBytes(128 << 10)
	for b.Loop() {
		EncodeLZMA2(text, 128<<10, DefaultEffort)
	}
}

// BenchmarkCRC32Combine combines the CRC-32s of 600 pieces of 128 KiB (an index of 100,000
// packages), against hashing the 75 MiB they make ("hash").
func BenchmarkCRC32Combine(b *testing.B) {
	piece := lzma2Inputs()["text"][:128<<10]
	sum := crc32.ChecksumIEEE(piece)
	b.Run("combine", func(b *testing.B) {
		for b.Loop() {
			var crc uint32
			for range 600 {
				crc = CRC32Combine(crc, sum, uint64(len(piece)))
			}
		}
	})
	b.Run("hash", func(b *testing.B) {
		for b.Loop() {
			var crc uint32
			for range 600 {
				crc = crc32.Update(crc, crc32.IEEETable, piece)
			}
		}
	})
}
