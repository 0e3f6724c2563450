// Package batchgc sets the garbage collector of armor's batch commands, build and push:
// a soft memory limit, below which the runtime's default (GOGC=100) collects.
//
// A fresh runner adding one package to 100,000 holds a few hundred megabytes of live data
// for a moment (the parent's manifest, the index in its three forms, the encoded
// manifest). Under GOGC=100 alone the heap grows to twice its live size before each
// collection, and so did the build's peak. Under a soft limit the collector runs more
// often near it instead, as the Go runtime's guide to the garbage collector recommends for
// a batch tool whose peak matters (a CI runner's memory). It is a soft limit: a build
// whose live data exceeds it still completes, with more collections (the runtime caps
// their share of the CPU).
//
// Memory not touched is the saving here: each page a process touches first costs a page
// fault, and on some virtual machines a fault costs tens of microseconds
// (BenchmarkPageFault measures it). A lower limit is worth its few more collections, and
// below it the default GOGC, which lets a small build reuse what it freed, beat GOGC=400,
// which let a first build of 10,000 packages grow to five times its live data before
// collecting (docs/benchmarks.md has the paired figures behind both choices).
package batchgc

import (
	"os"
	"runtime/debug"
)

// MemoryLimit is the soft memory limit (GOMEMLIMIT overrides it).
const MemoryLimit = 300 << 20

// Set sets the soft memory limit, unless the environment sets one, and never raises a
// limit already lower. GOGC is the runtime's (the environment's, else 100).
func Set() {
	if os.Getenv("GOMEMLIMIT") == "" {
		if cur := debug.SetMemoryLimit(-1); cur > MemoryLimit {
			debug.SetMemoryLimit(MemoryLimit)
		}
	}
}
