//go:build !linux

package edged

import "testing"

// pinProcess is Linux-only; elsewhere BenchmarkVsNginx runs with ARMOR_BENCH_PIN=0.
func pinProcess(b *testing.B, cpu int) (restore func()) {
	b.Fatal("CPU pinning needs Linux: set ARMOR_BENCH_PIN=0")
	return nil
}
