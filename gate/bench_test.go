package gate

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// synthRepo returns the Packages text of a repository of n packages shaped like a
// distribution: each package depends on up to four of those before it (see depTarget),
// some with version constraints, some through alternatives or a virtual name; one in
// fifty conflicts with another, one in twenty provides a virtual name. Every package can
// be installed.
func synthRepo(n int, seed uint64) string {
	r := rand.New(rand.NewPCG(seed, 7))
	var b strings.Builder
	b.Grow(n * 200)
	for i := range n {
		fmt.Fprintf(&b, "Package: p%06d\nVersion: %d.%d-1\nArchitecture: %s\n", i, 1+i%7, i%13, []string{"amd64", "amd64", "amd64", "all"}[r.IntN(4)])
		if r.IntN(3) == 0 {
			b.WriteString("Multi-Arch: same\n")
		}
		if i > 0 {
			var deps []string
			for range r.IntN(5) {
				j := depTarget(r, i)
				d := fmt.Sprintf("p%06d", j)
				switch r.IntN(6) {
				case 0:
					d += fmt.Sprintf(" (>= %d.0)", 1+j%7)
				case 1:
					d += fmt.Sprintf(" | p%06d", r.IntN(i))
				case 2:
					if j >= 20 {
						d = fmt.Sprintf("virt%d", (j/20)%(n/20+1))
					}
				}
				deps = append(deps, d)
			}
			if len(deps) > 0 {
				fmt.Fprintf(&b, "Depends: %s\n", strings.Join(deps, ", "))
			}
		}
		if i%20 == 0 {
			fmt.Fprintf(&b, "Provides: virt%d\n", (i/20)%(n/20+1))
		}
		if i%50 == 7 {
			fmt.Fprintf(&b, "Conflicts: c%06d\n", i)
		}
		b.WriteString("Description: synthetic\n\n")
	}
	return b.String()
}

func TestSynthRepoInstallable(t *testing.T) {
	pkgs, err := ReadPackages([]byte(synthRepo(3000, 1)), "synth")
	if err != nil {
		t.Fatal(err)
	}
	u := NewUniverse(pkgs, "amd64")
	broken, err := NewChecker(u).Broken(context.Background(), u.All())
	if err != nil {
		t.Fatal(err)
	}
	if len(broken) > 0 {
		t.Fatalf("%d synthetic packages cannot be installed, %s first: %v", len(broken), u.Package(broken[0]).ID(), u.Explain(broken[0]))
	}
}

// BenchmarkCheckAddOne100k: the check of a build that adds one package to a
// repository of 100,000 (parent, release and change given, as the build hands them
// over): the universe of the release, and the one check.
func BenchmarkCheckAddOne100k(b *testing.B) {
	parent, err := ReadPackages([]byte(synthRepo(100_000, 1)), "stable/main")
	if err != nil {
		b.Fatal(err)
	}
	add, err := ReadPackages([]byte("Package: new\nVersion: 1\nArchitecture: amd64\nDepends: p099999, p050000 | p000001, virt40\n"), "stable/main")
	if err != nil {
		b.Fatal(err)
	}
	release := append(parent[:len(parent):len(parent)], add...)
	b.ResetTimer()
	for b.Loop() {
		// As a build hands the change over: the index of the package added.
		r, err := Check(context.Background(), &Suite{Codename: "stable", Architectures: []string{"amd64"}, Release: release, Parent: parent, Added: []int{len(release) - 1}, Removed: []Package{}})
		if err != nil || r.Checked != 1 || len(r.Broken) != 0 {
			b.Fatalf("checked %d, broken %v", r.Checked, r.Broken)
		}
	}
}

// depTarget picks what package i depends on, as in a distribution: the first 2,000 are
// the core libraries, which depend on one another; a later package depends on a core
// library, or one time in seven on one of the 500 packages just before it. An
// installation then holds a few hundred packages, up to the 2,000 of the core, as
// Debian's do (bookworm's largest hold about 2,000).
func depTarget(r *rand.Rand, i int) int {
	const core = 2000
	if i <= core || r.IntN(7) != 0 {
		return r.IntN(min(i, core))
	}
	return i - 1 - r.IntN(min(i-core, 500))
}

// BenchmarkEncodeSnapshot100k: writing the snapshot of a release of 100,000 packages, as
// a build that checked it afresh does.
func BenchmarkEncodeSnapshot100k(b *testing.B) {
	pkgs, err := ReadPackages([]byte(synthRepo(100_000, 1)), "stable/main")
	if err != nil {
		b.Fatal(err)
	}
	ptrs := make([]*Package, len(pkgs))
	for i := range pkgs {
		ptrs[i] = &pkgs[i]
	}
	b.ResetTimer()
	for b.Loop() {
		EncodeSnapshot("bench", "stable", []string{"amd64"}, ptrs)
	}
}
