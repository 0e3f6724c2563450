package controld_test

import (
	"context"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/armor-apt/armor/internal/testkit/benchkit"
)

// BenchmarkBoundAddOne measures what invariant 9 adds to recording a release that adds
// one package to a repository of 100,000 (BenchmarkRecordAddOne's): the check that the
// manifest serves exactly what its signed files list, once the suites are verified,
// with the index cache as the release before left it. peak-MiB is how much the
// process's peak resident memory grew during one check; kept-MiB is the heap that the
// releases controld keeps as parents (verified.go) hold after the last one.
func BenchmarkBoundAddOne(b *testing.B) {
	cl, cas, srv := benchServerWith(b)
	ctx := context.Background()
	tr := bigActive(b, cl, cas, 100_000)
	restore := srv.KeepIndexCache()
	base := *tr.m
	base.Packages, base.Files = slices.Clone(tr.m.Packages), slices.Clone(tr.m.Files)
	var peak float64
	var cpu time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		restore()
		*tr.m = base // each release adds one package to the same parent
		tr.m.Packages, tr.m.Files = slices.Clone(base.Packages), slices.Clone(base.Files)
		check, err := srv.BoundCheck(ctx, "big", tr.addOne(b, cas, i))
		if err != nil {
			b.Fatal(err)
		}
		benchkit.ResetPeak(b)
		rss := benchkit.MiB(b, "VmRSS")
		cpu0 := benchkit.CPU(b)
		b.StartTimer()
		if err := check(); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		cpu += benchkit.CPU(b) - cpu0
		peak = max(peak, benchkit.MiB(b, "VmHWM")-rss)
		b.StartTimer()
	}
	b.StopTimer()
	kept := heapMiB()    // what the releases verified stay holding, beyond what controld keeps anyway
	srv.ForgetVerified() // for good: the benchmark is over
	kept -= heapMiB()
	b.ReportMetric(peak, "peak-MiB")
	b.ReportMetric(kept, "kept-MiB")
	b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N), "cpu-ms/op")
}

// heapMiB is the live heap after a collection.
func heapMiB() float64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return float64(ms.HeapAlloc) / (1 << 20)
}
