package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/armor-apt/armor/internal/batchgc"
	"github.com/armor-apt/armor/internal/testkit/benchkit"
	"github.com/armor-apt/armor/internal/testkit/controldtest"
	"github.com/armor-apt/armor/internal/testkit/s3test"
	"github.com/armor-apt/armor/internal/testkit/synth"
	"github.com/armor-apt/armor/store"
)

// BenchmarkColdRunner10k times what a CI runner that starts empty does to add one
// package to a repository of 10,000: armor build and armor push, from a checkout that
// holds only armor.toml, manifest.toml and the new .deb, against a local store and the
// S3 server on loopback, with controld in process. Each run's checkout has the manifest
// of the release the previous run activated, as a pipeline after git pull would.
func BenchmarkColdRunner10k(b *testing.B) {
	for _, kind := range []string{"local", "s3"} {
		b.Run(kind, func(b *testing.B) { benchColdRunner(b, kind, 10_000, false) })
	}
}

// BenchmarkColdRunner100k is the same at 100,000 packages, on the local store (its setup
// publishes the 100,000 packages once: minutes).
func BenchmarkColdRunner100k(b *testing.B) { benchColdRunner(b, "local", 100_000, false) }

// BenchmarkColdRunner100kProcesses is BenchmarkColdRunner100k with armor build and
// armor push run as a CI job runs them: two processes of the armor binary ($ARMOR_BIN,
// or one built for the benchmark), each with its own peak resident memory and CPU time,
// without the benchmark's own heap and controld's beside them. With $ARMOR_BIN_BASE (an
// armor built at the commit to compare with), the runs alternate the two binaries on
// one set-up, and each metric comes in both, the base's named base-…: a pair measured
// under the same load.
func BenchmarkColdRunner100kProcesses(b *testing.B) { benchColdRunner(b, "local", 100_000, true) }

func benchColdRunner(b *testing.B, kind string, n int, processes bool) {
	var remote string
	switch kind {
	case "local":
		remote = filepath.Join(b.TempDir(), "store")
	case "s3":
		remote = s3test.Start(b).Remote("armor", "bench")
	}
	s, err := store.OpenRclone(context.Background(), remote)
	if err != nil {
		b.Fatal(err)
	}
	srv := controldtest.Start(b, s)
	tokenFile := filepath.Join(b.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(srv.Secret+"\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	ws := b.TempDir()
	cfg := newProject(b, ws, projectOptions{store: remote, noDebs: true, archs: []string{"amd64"},
		extra: fmt.Sprintf("\n[controld]\nurl = %q\ntoken_file = %q\n", srv.URL, tokenFile)})
	data, err := os.ReadFile(cfg)
	if err != nil {
		b.Fatal(err)
	}
	data = []byte(strings.Replace(string(data), `main = ["debs/*.deb"]`, fmt.Sprintf(`main = ["debs/*.deb", %q]`, filepath.Join(benchkit.Debs(b, "..", n), "*.deb")), 1))
	// The workstation's debs/ is empty: its packages are elsewhere.
	data = []byte(strings.Replace(string(data), "[suite.inputs]", "allow_empty = true\n\n[suite.inputs]", 1))
	if err := os.WriteFile(cfg, data, 0o644); err != nil {
		b.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(ws, "debs"), 0o755); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	if _, err := runBuild(context.Background(), cfg, buildOptions{}); err != nil {
		b.Fatal(err)
	}
	var out strings.Builder
	if code := Main([]string{"-c", cfg, "repos", "create"}, &out, &out); code != 0 {
		b.Fatalf("repos create: %s", out.String())
	}
	if _, err := runPush(context.Background(), cfg, pushOptions{Activate: true}); err != nil {
		b.Fatal(err)
	}
	b.Logf("%s: published %d packages in %s", kind, n, time.Since(start).Round(time.Millisecond))
	manifestData, err := os.ReadFile(filepath.Join(ws, testManifestName))
	if err != nil {
		b.Fatal(err)
	}

	var bin string
	if processes {
		bin = armorBinary(b)
	}
	// The build and push commands set the collector (batchgc); runBuild and runPush,
	// which the in-process runs call, leave that to the commands.
	batchgc.Set()
	var wall time.Duration
	var requests int64
	var peak, buildPeak, base float64 // base: what the process holds before a run (controld in process, the setup's heap)
	var pair pairedRuns
	baseBin := os.Getenv("ARMOR_BIN_BASE")
	b.ResetTimer()
	b.StopTimer()
	for i := range b.N {
		// A runner starts on a machine that did nothing else: what the set-up or the run
		// before wrote (gigabytes at 100,000 packages) reaches the disk first, or the
		// build's flushes would wait for it. The checkout's own files are written after.
		syscall.Sync()
		runner := b.TempDir()
		for name, content := range map[string][]byte{testConfigName: data, testManifestName: manifestData} {
			if err := os.WriteFile(filepath.Join(runner, name), content, 0o644); err != nil {
				b.Fatal(err)
			}
		}
		if err := os.Mkdir(filepath.Join(runner, "debs"), 0o755); err != nil {
			b.Fatal(err)
		}
		if _, err := synth.WriteOne(filepath.Join(runner, "debs"), fmt.Sprintf("coldbench%d", i), "1.0-1", "amd64", ""); err != nil {
			b.Fatal(err)
		}
		rcfg := filepath.Join(runner, testConfigName)
		// The runner's armor.toml names the checkout's inputs only.
		rdata := strings.Replace(string(data), fmt.Sprintf(`, %q]`, filepath.Join(benchkit.Debs(b, "..", n), "*.deb")), "]", 1)
		// ARMOR_BENCH_CHECK="warn,off" gives the runs those check policies in turn, to
		// pair what the installability check adds to the build.
		policy := ""
		if v := os.Getenv("ARMOR_BENCH_CHECK"); v != "" {
			policies := strings.Split(v, ",")
			policy = policies[i%len(policies)]
			rdata = strings.Replace(rdata, "[suite.inputs]", fmt.Sprintf("check = %q\n\n[suite.inputs]", policy), 1)
		}
		if err := os.WriteFile(rcfg, []byte(rdata), 0o644); err != nil {
			b.Fatal(err)
		}
		if processes {
			runBin, side := bin, &pair.head
			if baseBin != "" && i%2 == 0 {
				runBin, side = baseBin, &pair.base
			}
			b.StartTimer()
			t0 := time.Now()
			var res struct{ Stats struct{ Packages int } }
			build := runBench(b, runBin, &res, "--json", "-c", rcfg, "build")
			push := runBench(b, runBin, nil, "-c", rcfg, "push")
			took := time.Since(t0)
			wall += took
			b.StopTimer()
			side.add(took, build, push)
			b.Logf("run %d (%s): build %s wall, %s CPU, %.0f MiB; push %s wall in all, %s CPU", i, runBin,
				build.wall.Round(time.Millisecond), build.cpu.Round(time.Millisecond), build.rss, (took - build.wall).Round(time.Millisecond), push.cpu.Round(time.Millisecond))
			buildRSS, pushRSS := build.rss, push.rss
			buildPeak, peak = max(buildPeak, buildRSS), max(peak, buildRSS, pushRSS)
			if res.Stats.Packages != n+1+i {
				b.Fatalf("run %d: %d packages, want %d", i, res.Stats.Packages, n+1+i)
			}
			if manifestData, err = os.ReadFile(filepath.Join(runner, testManifestName)); err != nil {
				b.Fatal(err)
			}
			continue
		}
		benchkit.ResetPeak(b)
		base = max(base, benchkit.MiB(b, "VmRSS"))
		stopProfile := benchProfile(b, i)
		b.StartTimer()
		t0 := time.Now()
		cpu0 := processCPU(b)
		counted := store.NewCounting(s)
		res, err := runBuild(context.Background(), rcfg, buildOptions{Store: counted})
		if err != nil {
			b.Fatal(err)
		}
		built := time.Since(t0)
		b.Logf("run %d, check = %q: build %s wall, %s CPU", i, policy, built.Round(time.Millisecond), (processCPU(b) - cpu0).Round(time.Millisecond))
		// In a pipeline build and push are two processes: the build's own peak too.
		buildPeak = max(buildPeak, benchkit.MiB(b, "VmHWM"))
		if os.Getenv("ARMOR_BENCH_PROFILE") != "" {
			fmt.Fprintf(os.Stderr, "timed run %d: build done\n", i)
		}
		if _, err := runPush(context.Background(), rcfg, pushOptions{Activate: true, Store: counted}); err != nil {
			b.Fatal(err)
		}
		wall += time.Since(t0)
		b.StopTimer()
		b.Logf("run %d: push %s wall", i, (time.Since(t0) - built).Round(time.Millisecond))
		stopProfile()
		requests += counted.Counts().Requests()
		peak = max(peak, benchkit.MiB(b, "VmHWM"))
		if res.Stats.Packages != n+1+i {
			b.Fatalf("run %d: %d packages, want %d", i, res.Stats.Packages, n+1+i)
		}
		if manifestData, err = os.ReadFile(filepath.Join(runner, testManifestName)); err != nil {
			b.Fatal(err)
		}
	}
	if baseBin != "" && processes {
		pair.report(b)
		return
	}
	b.ReportMetric(float64(wall.Milliseconds())/float64(b.N), "build+push-ms")
	b.ReportMetric(peak, "peak-MiB")
	b.ReportMetric(buildPeak, "build-peak-MiB")
	if processes {
		b.ReportMetric(float64(pair.head.cpu.Milliseconds())/float64(pair.head.n), "build+push-cpu-ms")
	}
	if !processes {
		b.ReportMetric(base, "base-MiB")
		b.ReportMetric(float64(requests)/float64(b.N), "store-requests")
	}
}

// pairedRuns sums the runs of the binary measured (head) and of $ARMOR_BIN_BASE.
type pairedRuns struct{ head, base runSums }

type runSums struct {
	n         int
	wall, cpu time.Duration // build and push
	buildPeak float64       // MiB
}

func (r *runSums) add(wall time.Duration, build, push procRun) {
	r.n++
	r.wall += wall
	r.cpu += build.cpu + push.cpu
	r.buildPeak = max(r.buildPeak, build.rss)
}

func (p *pairedRuns) report(b *testing.B) {
	for _, side := range []struct {
		prefix string
		r      *runSums
	}{{"", &p.head}, {"base-", &p.base}} {
		if side.r.n == 0 {
			continue
		}
		b.ReportMetric(float64(side.r.wall.Milliseconds())/float64(side.r.n), side.prefix+"build+push-ms")
		b.ReportMetric(float64(side.r.cpu.Milliseconds())/float64(side.r.n), side.prefix+"build+push-cpu-ms")
		b.ReportMetric(side.r.buildPeak, side.prefix+"build-peak-MiB")
	}
}

// procRun is what GNU time reports of one process.
type procRun struct {
	wall, cpu time.Duration // cpu: user and system
	rss       float64       // peak resident memory, MiB
}

// runBench runs the armor binary with args, decodes its standard output into out unless
// out is nil, and returns the process's peak resident memory and CPU time, as GNU time
// reports them. The process's own rusage would not do: a child that Go starts (clone with
// CLONE_VM, then exec) is charged the peak of the benchmark's whole address space at the
// exec; time's child is forked from time, whose address space is small.
func runBench(b *testing.B, bin string, out any, args ...string) procRun {
	b.Helper()
	const gnuTime = "/usr/bin/time"
	if _, err := os.Stat(gnuTime); err != nil {
		b.Fatalf("%s is needed to measure the peak memory of armor's processes: apt-get install time", gnuTime)
	}
	report := filepath.Join(b.TempDir(), "time")
	cmd := exec.Command(gnuTime, append([]string{"-f", "%M %U %S", "-o", report, bin}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	took := time.Since(start)
	if err != nil {
		b.Fatalf("armor %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	if out != nil {
		if err := json.Unmarshal(stdout.Bytes(), out); err != nil {
			b.Fatalf("armor %s: %v\n%s", strings.Join(args, " "), err, stdout.String())
		}
	}
	data, err := os.ReadFile(report)
	if err != nil {
		b.Fatal(err)
	}
	var kb, user, sys float64
	if _, err := fmt.Sscan(string(data), &kb, &user, &sys); err != nil {
		b.Fatalf("%s -f '%%M %%U %%S' wrote %q: %v", gnuTime, data, err)
	}
	return procRun{wall: took, cpu: time.Duration((user + sys) * float64(time.Second)), rss: kb / 1024}
}

// benchProfile profiles one timed run when $ARMOR_BENCH_PROFILE names a file prefix:
// PREFIX-cpu-N (CPU) and PREFIX-heap-N (allocations during the run, as a heap profile
// whose base is PREFIX-heap-N.base). The test flags -cpuprofile and -memprofile would
// profile the set-up, which takes minutes, too.
func benchProfile(b *testing.B, i int) func() {
	prefix := os.Getenv("ARMOR_BENCH_PROFILE")
	if prefix == "" {
		return func() {}
	}
	write := func(name, kind string) {
		f, err := os.Create(name)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		if err := pprof.Lookup(kind).WriteTo(f, 0); err != nil {
			b.Fatal(err)
		}
	}
	runtime.MemProfileRate = 64 << 10
	runtime.GC()
	write(fmt.Sprintf("%s-heap-%d.base", prefix, i), "allocs")
	cpu, err := os.Create(fmt.Sprintf("%s-cpu-%d", prefix, i))
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(cpu); err != nil {
		b.Fatal(err)
	}
	// Marks for GODEBUG=gctrace=1, whose lines go to standard error too.
	fmt.Fprintf(os.Stderr, "timed run %d starts\n", i)
	return func() {
		fmt.Fprintf(os.Stderr, "timed run %d ends\n", i)
		pprof.StopCPUProfile()
		cpu.Close()
		runtime.GC()
		write(fmt.Sprintf("%s-heap-%d", prefix, i), "allocs")
	}
}
