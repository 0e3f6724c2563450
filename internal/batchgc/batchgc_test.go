package batchgc

import (
	"runtime/debug"
	"testing"
)

// TestSet: the limit and GOGC are set unless the environment sets them, and a lower
// limit is never raised.
func TestSet(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	for _, tc := range []struct {
		name, gogc, memlimit string
		limitBefore          int64
		wantPercent          int
		wantLimit            int64
	}{
		{name: "defaults", limitBefore: 1 << 62, wantPercent: Percent, wantLimit: MemoryLimit},
		{name: "a lower limit stays", limitBefore: 100 << 20, wantPercent: Percent, wantLimit: 100 << 20},
		{name: "the environment's stay", gogc: "50", memlimit: "1GiB", limitBefore: 1 << 30, wantPercent: 100, wantLimit: 1 << 30},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("GOGC", tc.gogc)
			t.Setenv("GOMEMLIMIT", tc.memlimit)
			debug.SetGCPercent(100)
			debug.SetMemoryLimit(tc.limitBefore)
			Set()
			if got := debug.SetGCPercent(100); got != tc.wantPercent {
				t.Errorf("GOGC %d, want %d", got, tc.wantPercent)
			}
			if got := debug.SetMemoryLimit(-1); got != tc.wantLimit {
				t.Errorf("memory limit %d, want %d", got, tc.wantLimit)
			}
		})
	}
}
