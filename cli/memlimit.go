package cli

import (
	"os"
	"runtime/debug"
)

// batchMemoryLimit is the soft memory limit of the commands that build and push
// (GOMEMLIMIT overrides it). A fresh runner adding one package to 100,000 holds about
// 240 MB of live data for a moment (the parent's manifest, the index in its three forms,
// the encoded manifest); under the default GOGC=100 alone the heap grows to twice its
// live size before each collection, and the build peaked near 480 MiB. Under a soft limit
// the collector runs more often near it instead, as the Go runtime's guide to the garbage
// collector recommends for a batch tool whose peak matters (a CI runner's memory). It is
// a soft limit: a build whose live data exceeds it still completes, with more
// collections (the runtime caps their share of the CPU).
const batchMemoryLimit = 320 << 20

// limitBatchMemory sets the soft memory limit of a build or a push, unless the
// environment sets one (GOMEMLIMIT), and never raises a limit already lower.
func limitBatchMemory() {
	if os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	if cur := debug.SetMemoryLimit(-1); cur > batchMemoryLimit {
		debug.SetMemoryLimit(batchMemoryLimit)
	}
}
