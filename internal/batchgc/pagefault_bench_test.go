package batchgc

import (
	"syscall"
	"testing"
	"time"
)

// BenchmarkPageFault measures what the first touch of fresh memory costs on this
// machine, per 4 KiB page: the floor under a build's time that its peak memory sets (a
// fresh runner at 100,000 packages touches about 350 MiB). On bare metal a fault costs
// well under a microsecond; under some virtual machines, tens of them.
//
//	go test ./internal/batchgc -run '^$' -bench PageFault -benchtime 10x
func BenchmarkPageFault(b *testing.B) {
	const size = 64 << 20
	var took time.Duration
	for range b.N {
		mem, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		for i := 0; i < size; i += 4096 {
			mem[i] = 1
		}
		took += time.Since(start)
		if err := syscall.Munmap(mem); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(took.Nanoseconds())/1e3/float64(b.N*size/4096), "µs/page")
	b.ReportMetric(float64(took.Milliseconds())/float64(b.N)*(350.0/64), "ms-per-350MiB")
}
