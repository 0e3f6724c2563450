package cli

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/armor-apt/armor/cli/config"
	"github.com/armor-apt/armor/gen"
	"github.com/armor-apt/armor/manifest"
)

// benchRelease returns n packages of one suite shaped like a distribution (each depends
// on up to four before it, some versioned, some alternatives; every 20th provides a
// virtual name others depend on), with their stanzas by digest.
func benchRelease(n int) ([]manifest.Package, map[string][]byte) {
	r := rand.New(rand.NewPCG(1, 7))
	pkgs := make([]manifest.Package, n)
	stanzas := make(map[string][]byte, n)
	for i := range n {
		name := fmt.Sprintf("p%06d", i)
		var b strings.Builder
		fmt.Fprintf(&b, "Package: %s\nVersion: %d.%d-1\nArchitecture: amd64\n", name, 1+i%7, i%13)
		var deps []string
		n := 0
		if i > 0 {
			n = r.IntN(5)
		}
		for range n {
			j := depTarget(r, i)
			d := fmt.Sprintf("p%06d", j)
			switch r.IntN(6) {
			case 0:
				d += fmt.Sprintf(" (>= %d.0)", 1+j%7)
			case 1:
				d += fmt.Sprintf(" | p%06d", r.IntN(i))
			case 2:
				if j >= 20 {
					d = fmt.Sprintf("virt%d", j/20)
				}
			}
			deps = append(deps, d)
		}
		if len(deps) > 0 {
			fmt.Fprintf(&b, "Depends: %s\n", strings.Join(deps, ", "))
		}
		if i%20 == 0 {
			fmt.Fprintf(&b, "Provides: virt%d\n", i/20)
		}
		b.WriteString("Description: synthetic\n")
		sum := fmt.Sprintf("%064x", i)
		pkgs[i] = manifest.Package{Suite: "stable", Component: "main", Name: name, Version: fmt.Sprintf("%d.%d-1", 1+i%7, i%13), Architecture: "amd64", Path: "pool/main/p/" + name + ".deb", SHA256: sum}
		stanzas[sum] = []byte(b.String())
	}
	return pkgs, stanzas
}

// BenchmarkCheckHookAddOne100k: the build's check of a release that adds one package to
// 100,000, as armor build runs it after an earlier build kept the packages checked: the
// cache read, the release's packages from it, the check, and the cache written again.
func BenchmarkCheckHookAddOne100k(b *testing.B) {
	dir := b.TempDir()
	cfg := &config.File{Path: filepath.Join(dir, "armor.toml"), Output: config.Output{Cache: "cache"},
		Suites: []config.Suite{{Codename: "stable", Components: []string{"main"}, Architectures: []string{"amd64"}, Check: "refuse"}}}
	parentPkgs, in := benchAddOne()
	// The build before kept its packages.
	warm := newGateRun(cfg)
	if err := warm.hook(context.Background(), &gen.GateInput{Packages: parentPkgs, Stanza: in.Stanza}); err != nil {
		b.Fatal(err)
	}
	warm.seal(in.Parent.ID)
	warm.wait()
	// The second build with this cache keeps a snapshot (the first only notes it).
	warm = newGateRun(cfg)
	if err := warm.hook(context.Background(), &gen.GateInput{Packages: parentPkgs, Stanza: in.Stanza}); err != nil {
		b.Fatal(err)
	}
	warm.seal(in.Parent.ID)
	warm.wait()
	// Each run starts from what the build before kept, as a pipeline's next build would.
	_, changePath := warm.keptPaths("stable")
	kept, keptErr := os.ReadFile(changePath)
	restore := func() {
		if keptErr == nil {
			if err := os.WriteFile(changePath, kept, 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ResetTimer()
	cpu0 := processCPU(b)
	for range b.N {
		g := newGateRun(cfg)
		if err := g.hook(context.Background(), in); err != nil {
			b.Fatal(err)
		}
		g.seal("release")
		g.wait()
		if len(g.kept) != 1 {
			b.Fatal("the check did not start from what the build before kept")
		}
		if r := g.reports[0]; r.Checked != 1 || len(r.Broken) != 0 {
			b.Fatalf("checked %d, broken %d", r.Checked, len(r.Broken))
		}
		b.StopTimer()
		restore()
		b.StartTimer()
	}
	b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N)/1e6, "cpu-ms/op")
}

// processCPU is the CPU time the process has used, the garbage collector's included: the
// machine is shared, so CPU time says more than wall time.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// depTarget is gate's synthRepo's: core libraries, and now and then a package just before.
func depTarget(r *rand.Rand, i int) int {
	const core = 2000
	if i <= core || r.IntN(7) != 0 {
		return r.IntN(min(i, core))
	}
	return i - 1 - r.IntN(min(i-core, 500))
}

// BenchmarkCheckHookAddOne100kCold is BenchmarkCheckHookAddOne100k on a fresh runner: no
// cache, only the parent's manifest, every stanza read (as the build hands them over),
// and what the next build would start from written, as a sealed build writes it.
func BenchmarkCheckHookAddOne100kCold(b *testing.B) {
	_, in := benchAddOne()
	b.ResetTimer()
	var cpu time.Duration
	for range b.N {
		b.StopTimer()
		dir := b.TempDir()
		cfg := &config.File{Path: filepath.Join(dir, "armor.toml"), Output: config.Output{Cache: "cache"},
			Suites: []config.Suite{{Codename: "stable", Components: []string{"main"}, Architectures: []string{"amd64"}, Check: "refuse"}}}
		if err := os.MkdirAll(filepath.Join(dir, "cache"), 0o755); err != nil {
			b.Fatal(err)
		}
		cpu0 := processCPU(b)
		b.StartTimer()
		g := newGateRun(cfg)
		if err := g.hook(context.Background(), in); err != nil {
			b.Fatal(err)
		}
		g.seal("release")
		g.wait()
		b.StopTimer()
		cpu += processCPU(b) - cpu0
		if r := g.reports[0]; len(g.kept) != 0 || r.Checked != 1 || len(r.Broken) != 0 {
			b.Fatalf("kept %v, checked %d, broken %d", g.kept, r.Checked, len(r.Broken))
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(cpu)/float64(b.N)/1e6, "cpu-ms/op")
}

// benchAddOne returns the packages of a release of 100,000 (benchRelease) and the check's
// input for adding one package to it that depends on three of them.
func benchAddOne() ([]manifest.Package, *gen.GateInput) {
	parentPkgs, stanzas := benchRelease(100_000)
	parent := &manifest.Manifest{ID: "parent", Packages: parentPkgs}
	sum := fmt.Sprintf("%064x", 1<<40)
	stanzas[sum] = []byte("Package: new\nVersion: 1\nArchitecture: amd64\nDepends: p099999, p050000 | p000001, virt40\n")
	release := append(parentPkgs[:len(parentPkgs):len(parentPkgs)], manifest.Package{Suite: "stable", Component: "main", Name: "new", Version: "1", Architecture: "amd64", Path: "pool/main/n/new.deb", SHA256: sum})
	return parentPkgs, &gen.GateInput{Parent: parent, Packages: release, Stanza: func(p *manifest.Package) ([]byte, error) { return stanzas[p.SHA256], nil }}
}
