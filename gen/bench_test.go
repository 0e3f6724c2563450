package gen_test

// Benchmarks of the build at repository sizes of 10,000 and 100,000 packages.
//
// The synthetic .deb files are written once by a separate process
// (`go run ./cmd/synth`) into os.TempDir()/armor-bench-<n>, and kept there
// for later runs (about 10 KiB per package on disk), so neither their generation nor its
// memory counts in a benchmark. Each benchmark prepares its built tree before the timer
// starts, once per process.
//
// Every incremental operation is what `armor build` does: gen.Build, which loads the
// previous manifest from its file while it lists the inputs, then write the new manifest.
// Custom metrics:
//
//	peak-MiB   the process's peak resident set during the operation: VmHWM, reset
//	           (/proc/self/clear_refs) after a GC before each operation, so it includes
//	           the memory the benchmark process holds between operations (base-MiB)
//	base-MiB   the resident set just before the operation
//	build-ms   gen.Build, loading the previous manifest and writing the new one included
//
// Targets (docs/design.md, invariant 6, "cost follows change"): adding one package to 10,000 in ≤ 0.2 s and
// ≤ 100 MiB; to 100,000 in ≤ 1 s and ≤ 500 MiB; a full build of 10,000 in at most twice
// BenchmarkReadHash10k, which only reads and hashes every .deb.

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/armor-apt/armor/gen"
	"github.com/armor-apt/armor/internal/batchgc"
	"github.com/armor-apt/armor/internal/testkit/benchkit"
	"github.com/armor-apt/armor/manifest"
	"golang.org/x/sync/errgroup"
)

// benchDebs returns a directory of n synthetic packages (seed 1), made once.
func benchDebs(b *testing.B, n int) string { return benchkit.Debs(b, "..", n) }

// benchDirs are removed after the benchmarks run (see TestMain).
var (
	benchDirsMu sync.Mutex
	benchDirs   []string
)

func benchTempDir(b *testing.B) string {
	b.Helper()
	d, err := os.MkdirTemp("", "armor-bench-tree-")
	if err != nil {
		b.Fatal(err)
	}
	benchDirsMu.Lock()
	benchDirs = append(benchDirs, d)
	benchDirsMu.Unlock()
	return d
}

func TestMain(m *testing.M) {
	code := m.Run()
	for _, d := range benchDirs {
		os.RemoveAll(d)
	}
	os.Exit(code)
}

// benchRepo is a built repository of the synthetic packages plus the files in Base/extra.
type benchRepo struct {
	Base     string
	Opts     gen.Options
	Manifest string // the manifest file
	n        int    // synthetic packages
	extra    string // the extra package while it is an input
	extras   int    // extra packages added so far
}

func newBenchRepo(b *testing.B, debs string) *benchRepo {
	b.Helper()
	base := benchTempDir(b)
	r := &benchRepo{
		Base: base,
		Opts: gen.Options{
			Repository: "bench", Origin: "armor bench", Label: "armor bench",
			Suites: []gen.Suite{{
				Codename: "stable", Components: []string{"main"}, Architectures: []string{"amd64"},
				Inputs:     map[string][]string{"main": {filepath.Join(debs, "*.deb"), "extra/*.deb"}},
				AllowEmpty: true, // extra/ is empty until a benchmark adds a package
				// Deleting the extra file removes its package, as it did before the
				// parent became the truth: the figures stay comparable.
				Sync: true,
			}},
			BaseDir:  base,
			TreeDir:  filepath.Join(base, "tree"),
			CacheDir: filepath.Join(base, "cache"),
			Key:      fixtureKey(b, "rsa"),
			Date:     testDate,
		},
		Manifest: filepath.Join(base, "manifest.toml"),
	}
	if err := os.MkdirAll(filepath.Join(base, "extra"), 0o755); err != nil {
		b.Fatal(err)
	}
	return r
}

// build is one `armor build`: build, loading the previous manifest as the build goes (it
// overlaps the listing of the inputs, so its time is part of build's), and writing the
// new one.
func (r *benchRepo) build(b *testing.B) (res *gen.Result, build time.Duration) {
	b.Helper()
	t0 := time.Now()
	o := r.Opts
	o.LoadPrevious = func() (*manifest.Manifest, error) {
		m, err := manifest.Load(r.Manifest)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return m, err
	}
	o.Manifest = r.Manifest // written as armor build writes it: by the build
	res, err := gen.Build(context.Background(), o)
	if err != nil {
		b.Fatal(err)
	}
	return res, time.Since(t0)
}

// addExtra adds one package to the inputs, outside the timer. Its name sorts into the
// middle of the index, where an added package lands on average, so that the release
// digests are computed again over half the index; and each is a new version, so that its
// chunk of the index is compressed afresh rather than found in the cache.
func (r *benchRepo) addExtra(b *testing.B) {
	b.Helper()
	r.extras++
	name := fmt.Sprintf("pkg%06dextra", r.n/2)
	r.extra = writeOne(b, filepath.Join(r.Base, "extra"), name, fmt.Sprintf("1.0-%d", r.extras), "amd64", "pkg000001")
}

// removeExtra takes the extra package out of the inputs, outside the timer.
func (r *benchRepo) removeExtra(b *testing.B) {
	b.Helper()
	if err := os.Remove(r.extra); err != nil {
		b.Fatal(err)
	}
}

var (
	preparedMu sync.Mutex
	prepared   = map[int]*benchRepo{}
)

// preparedRepo returns a repository of n synthetic packages, built once per process.
// Every benchmark (and every run of one, as b.N grows) leaves it as it found it: built,
// without the extra package. The garbage collector is set as armor build sets it.
func preparedRepo(b *testing.B, n int) *benchRepo {
	b.Helper()
	batchgc.Set()
	preparedMu.Lock()
	defer preparedMu.Unlock()
	if r, ok := prepared[n]; ok {
		return r
	}
	r := newBenchRepo(b, benchDebs(b, n))
	r.n = n
	start := time.Now()
	if res, _ := r.build(b); res.Stats.Packages != n {
		b.Fatalf("prepared repository has %d packages, want %d", res.Stats.Packages, n)
	}
	b.Logf("prepared a built repository of %d packages in %s", n, time.Since(start).Round(time.Millisecond))
	prepared[n] = r
	return r
}

func rss(b *testing.B, field string) float64 { return benchkit.MiB(b, field) }

func resetPeak(b *testing.B) { benchkit.ResetPeak(b) }

// meter accumulates an operation's metrics over b.N runs.
type meter struct {
	build      time.Duration
	base, peak float64
}

func (m *meter) start(b *testing.B) {
	b.Helper()
	resetPeak(b)
	m.base = max(m.base, rss(b, "VmRSS"))
	b.StartTimer()
}

func (m *meter) stop(b *testing.B, build time.Duration) {
	b.Helper()
	b.StopTimer()
	m.peak = max(m.peak, rss(b, "VmHWM"))
	m.build += build
}

func (m *meter) report(b *testing.B) {
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) / float64(b.N) }
	b.ReportMetric(m.peak, "peak-MiB")
	b.ReportMetric(m.base, "base-MiB")
	b.ReportMetric(ms(m.build), "build-ms")
}

// BenchmarkReadHash10k reads and SHA-256es every .deb once, on GOMAXPROCS goroutines as
// the build reads them: the floor for a full build.
func BenchmarkReadHash10k(b *testing.B) {
	debs := benchDebs(b, 10_000)
	paths, err := filepath.Glob(filepath.Join(debs, "*.deb"))
	if err != nil || len(paths) != 10_000 {
		b.Fatalf("%d packages in %s (%v)", len(paths), debs, err)
	}
	var m meter
	b.StopTimer()
	b.ResetTimer()
	for range b.N {
		m.start(b)
		var g errgroup.Group
		g.SetLimit(runtime.GOMAXPROCS(0))
		var bytesRead int64
		var mu sync.Mutex
		for _, p := range paths {
			g.Go(func() error {
				f, err := os.Open(p)
				if err != nil {
					return err
				}
				defer f.Close()
				h := sha256.New()
				n, err := io.Copy(h, f)
				mu.Lock()
				bytesRead += n
				mu.Unlock()
				return err
			})
		}
		if err := g.Wait(); err != nil {
			b.Fatal(err)
		}
		m.stop(b, 0)
		b.SetBytes(bytesRead)
	}
	b.ReportMetric(m.peak, "peak-MiB")
}

// BenchmarkFullBuild10k builds 10,000 packages into an empty tree and cache each time.
func BenchmarkFullBuild10k(b *testing.B) {
	debs := benchDebs(b, 10_000)
	var m meter
	b.StopTimer()
	b.ResetTimer()
	for range b.N {
		r := newBenchRepo(b, debs)
		m.start(b)
		res, build := r.build(b)
		m.stop(b, build)
		if res.Stats.Packages != 10_000 || res.Stats.Read != 10_000 {
			b.Fatalf("stats %+v", res.Stats)
		}
		// Each tree stays until the process ends (TestMain removes it). Removing it here
		// would time the next build against the file system's treatment of 20,000 inodes
		// freed a moment before: without a journal, ext4 skips recently deleted inodes
		// one by one when it allocates new ones, which made file creation several times
		// slower here. A first build does not follow a mass deletion.
	}
	m.report(b)
}

func BenchmarkAddOne10k(b *testing.B)    { benchAddOne(b, 10_000) }
func BenchmarkAddOne100k(b *testing.B)   { benchAddOne(b, 100_000) }
func BenchmarkRemoveOne10k(b *testing.B) { benchRemoveOne(b, 10_000) }
func BenchmarkNoChange10k(b *testing.B)  { benchNoChange(b, 10_000) }

func BenchmarkColdAddOne10k(b *testing.B) { benchColdAddOne(b, 10_000) }

// benchColdAddOne times a fresh CI runner adding one package to n: no tree, no cache,
// none of the other .deb files, only the parent's manifest and the store (in memory
// here), from which the build fetches the parent's dists/ files.
func benchColdAddOne(b *testing.B, n int) {
	r := preparedRepo(b, n)
	parent, err := manifest.Load(r.Manifest)
	if err != nil {
		b.Fatal(err)
	}
	st := distsStoreOf(b, r.Opts.TreeDir, parent)
	var m meter
	b.StopTimer()
	b.ResetTimer()
	for i := range b.N {
		base := benchTempDir(b)
		name := fmt.Sprintf("pkg%06dextra", n/2)
		writeOne(b, filepath.Join(base, "in"), name, fmt.Sprintf("1.0-cold%d", i), "amd64", "pkg000001")
		o := r.Opts
		o.Suites = slices.Clone(o.Suites)
		o.Suites[0].Inputs = map[string][]string{"main": {"in/*.deb"}}
		o.Suites[0].Sync = false
		o.BaseDir, o.TreeDir, o.CacheDir = base, filepath.Join(base, "tree"), filepath.Join(base, "cache")
		o.Manifest = filepath.Join(base, "manifest.toml")
		o.Previous, o.Fetch = parent, st.fetch
		m.start(b)
		t0 := time.Now()
		res, err := gen.Build(context.Background(), o)
		if err != nil {
			b.Fatal(err)
		}
		m.stop(b, time.Since(t0))
		if s := res.Stats; s.Added != 1 || s.Removed != 0 || s.Packages != n+1 {
			b.Fatalf("cold add one: stats %+v", s)
		}
		os.RemoveAll(base)
	}
	m.report(b)
}

// benchAddOne times adding one package to n and rebuilding; between operations, outside
// the timer, it removes the package and rebuilds again.
func benchAddOne(b *testing.B, n int) {
	r := preparedRepo(b, n)
	var m meter
	b.StopTimer()
	b.ResetTimer()
	for range b.N {
		r.addExtra(b)
		m.start(b)
		res, build := r.build(b)
		m.stop(b, build)
		if s := res.Stats; s.Read != 1 || s.Added != 1 || s.IndexesWritten != 1 {
			b.Fatalf("add one: stats %+v", s)
		}
		r.removeExtra(b)
		r.build(b)
	}
	m.report(b)
}

// benchRemoveOne times removing one package of n+1 and rebuilding; before each
// operation, outside the timer, it adds the package back and rebuilds.
func benchRemoveOne(b *testing.B, n int) {
	r := preparedRepo(b, n)
	var m meter
	b.StopTimer()
	b.ResetTimer()
	for range b.N {
		r.addExtra(b)
		r.build(b)
		r.removeExtra(b)
		m.start(b)
		res, build := r.build(b)
		m.stop(b, build)
		if s := res.Stats; s.Read != 0 || s.Removed != 1 || s.IndexesWritten != 1 {
			b.Fatalf("remove one: stats %+v", s)
		}
	}
	m.report(b)
}

// benchNoChange times a rebuild that finds everything up to date.
func benchNoChange(b *testing.B, n int) {
	r := preparedRepo(b, n)
	var m meter
	b.StopTimer()
	b.ResetTimer()
	for range b.N {
		m.start(b)
		res, build := r.build(b)
		m.stop(b, build)
		if !res.UpToDate || res.Stats.Read != 0 {
			b.Fatalf("no change: up to date %v, stats %+v", res.UpToDate, res.Stats)
		}
	}
	m.report(b)
}
