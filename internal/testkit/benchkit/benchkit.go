// Package benchkit holds what the benchmarks of several packages share: a directory of
// synthetic packages made once per machine, and the peak resident memory of the process.
package benchkit

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Debs returns a directory of n synthetic packages (seed 1) under the temporary
// directory, generating it with cmd/synth the first time; the directory appears complete
// or not at all. root is the module's root, relative to the calling test's directory.
func Debs(tb testing.TB, root string, n int) string {
	tb.Helper()
	dir := filepath.Join(os.TempDir(), "armor-bench-"+strconv.Itoa(n))
	if _, err := os.Stat(dir); err == nil {
		return dir
	}
	tmp := dir + ".partial"
	if err := os.RemoveAll(tmp); err != nil {
		tb.Fatal(err)
	}
	start := time.Now()
	cmd := exec.Command("go", "run", "./cmd/synth", "-n", strconv.Itoa(n), "-o", tmp)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("generate %d packages: %v\n%s", n, err, out)
	}
	if err := os.Rename(tmp, dir); err != nil {
		tb.Fatal(err)
	}
	tb.Logf("generated %d packages in %s in %s", n, dir, time.Since(start).Round(time.Second))
	return dir
}

// MiB reads a field (VmHWM, VmRSS) of /proc/self/status in MiB.
func MiB(tb testing.TB, field string) float64 {
	tb.Helper()
	f, err := os.Open("/proc/self/status")
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			if err != nil {
				tb.Fatal(err)
			}
			return kb / 1024
		}
	}
	tb.Fatalf("no %s in /proc/self/status", field)
	return 0
}

// ResetPeak returns memory to the OS and resets VmHWM to the current resident set, so
// that the next reading of VmHWM is the peak of what runs in between.
func ResetPeak(tb testing.TB) {
	tb.Helper()
	runtime.GC()
	debug.FreeOSMemory()
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		tb.Fatalf("reset peak RSS (needs Linux ≥ 4.0): %v", err)
	}
}

// CPU returns the CPU time (user and system) the process has used so far. Around a
// timed section it measures the work done, whatever the load of a shared machine adds
// to the wall time.
func CPU(tb testing.TB) time.Duration {
	tb.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
