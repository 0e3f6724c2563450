package batchgc

import (
	"runtime/debug"
	"testing"
)

// TestSet: the limit is set unless the environment sets one, a lower limit is never
// raised, and GOGC is left as the runtime has it.
func TestSet(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	for _, tc := range []struct {
		name, memlimit string
		limitBefore    int64
		wantLimit      int64
	}{
		{name: "default", limitBefore: 1 << 62, wantLimit: MemoryLimit},
		{name: "a lower limit stays", limitBefore: 100 << 20, wantLimit: 100 << 20},
		{name: "the environment's stays", memlimit: "1GiB", limitBefore: 1 << 30, wantLimit: 1 << 30},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("GOMEMLIMIT", tc.memlimit)
			debug.SetGCPercent(100)
			debug.SetMemoryLimit(tc.limitBefore)
			Set()
			if got := debug.SetGCPercent(100); got != 100 {
				t.Errorf("GOGC %d, want 100, the runtime's", got)
			}
			if got := debug.SetMemoryLimit(-1); got != tc.wantLimit {
				t.Errorf("memory limit %d, want %d", got, tc.wantLimit)
			}
		})
	}
}
