package cli

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/armor-apt/armor/internal/testkit/benchkit"
	"github.com/armor-apt/armor/internal/testkit/synth"
)

// BenchmarkAddOneVsReprepro10k puts a warm add-one beside reprepro's, in one run: a
// repository of 10,000 synthetic packages gets a new version of one package per
// operation, as `armor build` (the armor binary, a process, with the new .deb among its
// inputs) and as `reprepro includedeb stable NEW.deb` on a reprepro repository of the
// same packages, the two alternated and their order swapped every operation:
//
//	go test ./cli -run '^$' -bench AddOneVsReprepro10k -benchtime 10x -timeout 60m
//
// Both write Packages, Packages.gz, Packages.xz, Contents-amd64.gz and Release, and keep
// one version of the package (reprepro's way; keep_versions = 1 for armor); armor also
// writes by-hash copies and the manifest, and signs InRelease and Release.gpg, which
// reprepro is not asked to (it would need a gpg agent), so the comparison flatters it.
// Each side reports its ms/op; x-reprepro is armor's total time over reprepro's. The
// set-up (minutes) is kept in os.TempDir()/armor-bench-reprepro-10000 for later runs.
func BenchmarkAddOneVsReprepro10k(b *testing.B) {
	const n = 10_000
	if _, err := exec.LookPath("reprepro"); err != nil {
		b.Fatalf("reprepro is needed beside armor: .ci/install-deps installs it (apt-get install reprepro): %v", err)
	}
	bench := repreproBenchOnce(b, n)
	bin, cfg, extra, rep := bench.bin, bench.cfg, bench.extra, bench.reprepro
	var armorTime, reprepTime time.Duration
	b.ResetTimer()
	b.StopTimer()
	for i := range b.N {
		// One input of the extra package at a time: the build keeps its parent's version
		// until keep_versions prunes it.
		if bench.last != "" {
			if err := os.Remove(bench.last); err != nil {
				b.Fatal(err)
			}
		}
		deb, err := synth.WriteOne(extra, fmt.Sprintf("pkg%06dextra", n/2), fmt.Sprintf("1.0-%d", time.Now().UnixNano()), "amd64", "pkg000001")
		if err != nil {
			b.Fatal(err)
		}
		bench.last = deb
		armor := func() { armorTime += timed(b, bin, "-c", cfg, "build") }
		reprepro := func() { reprepTime += timed(b, "reprepro", "-b", rep, "includedeb", "stable", deb) }
		if i%2 == 0 {
			armor()
			reprepro()
		} else {
			reprepro()
			armor()
		}
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) / float64(b.N) }
	b.ReportMetric(ms(armorTime), "armor-ms/op")
	b.ReportMetric(ms(reprepTime), "reprepro-ms/op")
	b.ReportMetric(float64(armorTime)/float64(reprepTime), "x-reprepro")
}

// repreproBench is the set-up of BenchmarkAddOneVsReprepro10k: an armor project and a
// reprepro repository of the same packages, kept in os.TempDir() across runs and
// processes as the synthetic packages are (benchkit.Debs): making them takes minutes.
type repreproBench struct {
	bin, cfg, extra, reprepro string
	last                      string // the extra package's file now among the inputs
}

var repreproBenches = map[int]*repreproBench{}

func repreproBenchOnce(b *testing.B, n int) *repreproBench {
	b.Helper()
	if r := repreproBenches[n]; r != nil {
		return r
	}
	debs := benchkit.Debs(b, "..", n)
	ws := filepath.Join(os.TempDir(), fmt.Sprintf("armor-bench-reprepro-%d", n))
	r := &repreproBench{bin: os.Getenv("ARMOR_BIN"), cfg: filepath.Join(ws, testConfigName), extra: filepath.Join(ws, "extra"),
		reprepro: filepath.Join(ws, "reprepro")}
	if err := os.MkdirAll(ws, 0o755); err != nil {
		b.Fatal(err)
	}
	if r.bin == "" {
		// Built afresh by every process, where the set-up is kept: b.TempDir goes with b.
		r.bin = filepath.Join(ws, "armor")
		runAndCheck(b, "go", "build", "-o", r.bin, "./armor")
	}
	if _, err := os.Stat(filepath.Join(ws, "ready")); err != nil {
		r.setUp(b, debs, ws)
	}
	// The version an earlier run left; each run adds a newer one.
	if added, _ := filepath.Glob(filepath.Join(r.extra, "*.deb")); len(added) > 0 {
		r.last = added[0]
	}
	repreproBenches[n] = r
	return r
}

// setUp makes the armor project and the reprepro repository in ws. Like reprepro, which
// keeps one version of a package, armor keeps one (keep_versions), so both indexes hold
// n+1 packages whatever the number of runs.
func (r *repreproBench) setUp(b *testing.B, debs, ws string) {
	b.Helper()
	for _, d := range []string{r.extra, r.reprepro} {
		if err := os.RemoveAll(d); err != nil {
			b.Fatal(err)
		}
	}
	toml := fmt.Sprintf(`[repository]
name = "bench"
origin = "armor bench"

[[suite]]
codename = "stable"
components = ["main"]
architectures = ["amd64"]
allow_empty = true
keep_versions = 1

[suite.inputs]
main = [%q, "extra/*.deb"]

[signing]
key = %q
`, filepath.Join(debs, "*.deb"), abs(b, eddsaKey))
	if err := os.WriteFile(r.cfg, []byte(toml), 0o644); err != nil {
		b.Fatal(err)
	}
	if err := os.Mkdir(r.extra, 0o755); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	runAndCheck(b, r.bin, "-c", r.cfg, "build")
	b.Logf("armor: built %s in %s", debs, time.Since(start).Round(time.Millisecond))
	newReprepro(b, debs, r.reprepro)
	if err := os.WriteFile(filepath.Join(ws, "ready"), nil, 0o644); err != nil {
		b.Fatal(err)
	}
}

// newReprepro makes in dir a reprepro repository holding the packages of debs, exported
// as armor exports its own: Packages plain, gz and xz, and Contents-<arch>.gz.
func newReprepro(b *testing.B, debs, dir string) string {
	b.Helper()
	conf := filepath.Join(dir, "conf")
	if err := os.MkdirAll(conf, 0o755); err != nil {
		b.Fatal(err)
	}
	dist := "Codename: stable\nComponents: main\nArchitectures: amd64\nDebIndices: Packages Release . .gz .xz\nContents: .gz\n"
	if err := os.WriteFile(filepath.Join(conf, "distributions"), []byte(dist), 0o644); err != nil {
		b.Fatal(err)
	}
	paths, err := filepath.Glob(filepath.Join(debs, "*.deb"))
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	runAndCheck(b, "reprepro", append([]string{"-b", dir, "--export=never", "includedeb", "stable"}, paths...)...)
	runAndCheck(b, "reprepro", "-b", dir, "export")
	for _, f := range []string{"Packages.xz", "Packages.gz"} {
		if _, err := os.Stat(filepath.Join(dir, "dists/stable/main/binary-amd64", f)); err != nil {
			b.Fatalf("reprepro did not export %s: %v", f, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "dists/stable/main/Contents-amd64.gz")); err != nil {
		b.Fatalf("reprepro did not export Contents-amd64.gz: %v", err)
	}
	b.Logf("reprepro: included %d packages in %s", len(paths), time.Since(start).Round(time.Millisecond))
	return dir
}

// timed runs a command with the timer on and returns how long it took.
func timed(b *testing.B, name string, args ...string) time.Duration {
	b.Helper()
	cmd := exec.Command(name, args...)
	b.StartTimer()
	t0 := time.Now()
	out, err := cmd.CombinedOutput()
	d := time.Since(t0)
	b.StopTimer()
	if err != nil {
		b.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return d
}

func runAndCheck(b *testing.B, name string, args ...string) {
	b.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		b.Fatalf("%s %s: %v\n%s", name, strings.Join(args[:min(len(args), 6)], " "), err, out)
	}
}
