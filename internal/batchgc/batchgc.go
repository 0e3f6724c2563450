// Package batchgc sets the garbage collector of armor's batch commands, build and push:
// a soft memory limit, and collections far apart below it.
//
// A fresh runner adding one package to 100,000 holds a few hundred megabytes of live data
// for a moment (the parent's manifest, the index in its three forms, the encoded
// manifest). Under the default GOGC=100 alone the heap grows to twice its live size
// before each collection, and so did the build's peak. Under a soft limit the collector runs
// more often near it instead, as the Go runtime's guide to the garbage collector
// recommends for a batch tool whose peak matters (a CI runner's memory). It is a soft
// limit: a build whose live data exceeds it still completes, with more collections (the
// runtime caps their share of the CPU).
//
// Below the limit, GOGC=100 collected about ten times in a warm add-one at 100,000
// packages while the heap grew to the limit anyway: the early collections, of heaps a
// fraction of the final one, cost time and saved no memory (docs/benchmarks.md). With GOGC=400 the heap still stays under the limit; a small build, whose
// garbage stays far below it, holds at most five times its live data.
//
// A lower limit is worth its few more collections: each page a process touches first
// costs a page fault, and on some virtual machines a fault costs tens of microseconds
// (BenchmarkPageFault measures it), so that memory not touched saves more time than the
// collector spends (docs/benchmarks.md has the paired figures that chose 300 MiB).
package batchgc

import (
	"os"
	"runtime/debug"
)

const (
	// MemoryLimit is the soft memory limit (GOMEMLIMIT overrides it).
	MemoryLimit = 300 << 20
	// Percent is GOGC below the limit (GOGC overrides it).
	Percent = 400
)

// Set sets the soft memory limit and GOGC, each unless the environment sets it, and
// never raises a limit already lower.
func Set() {
	if os.Getenv("GOMEMLIMIT") == "" {
		if cur := debug.SetMemoryLimit(-1); cur > MemoryLimit {
			debug.SetMemoryLimit(MemoryLimit)
		}
	}
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(Percent)
	}
}
