package gate

import (
	"fmt"
	"slices"
	"strings"
)

// Policy says what a build does when a change leaves packages that cannot be installed.
type Policy string

// The policies a suite can have.
const (
	Refuse Policy = "refuse" // the build fails and writes nothing
	Warn   Policy = "warn"   // the build goes on and says which
	Off    Policy = "off"    // no check
)

// ParsePolicy reads a suite's check setting.
func ParsePolicy(s string) (Policy, error) {
	switch p := Policy(s); p {
	case Refuse, Warn, Off:
		return p, nil
	}
	return "", fmt.Errorf("check %q: use \"refuse\", \"warn\" or \"off\"", s)
}

// Suite is one suite of a release, as the gate checks it.
type Suite struct {
	Codename      string
	Architectures []string
	// Release holds the suite's binary packages (every component and architecture);
	// Parent the parent release's, nil for a check of the whole release.
	Release, Parent []Package
	// Base holds, by architecture, the packages of the base repositories the suite
	// names. Without a base (HasBase false), a relation on a name that no package of the
	// suite has or provides is taken as met from outside, and reported.
	Base    map[string][]Package
	HasBase bool
}

// Finding is a package that cannot be installed on one architecture.
type Finding struct {
	Package      *Package
	Architecture string
	Reasons      []string
	// Existing is true when the package could not be installed in the parent either: the
	// change did not cause it.
	Existing bool
}

// Report is what the gate found in a suite.
type Report struct {
	Suite   string
	Broken  []Finding
	Checked int // package checks run, over the suite's architectures
	// External lists, for each name no package of the suite has or provides (checked
	// without a base), the packages checked whose relations name it.
	External map[string][]string
}

// New returns the findings the change caused.
func (r *Report) New() []Finding {
	var out []Finding
	for _, f := range r.Broken {
		if !f.Existing {
			out = append(out, f)
		}
	}
	return out
}

// Check checks a suite: with Parent, only the packages the change can affect (those
// added, and those that could depend on a package removed); without, every package.
func Check(s *Suite) *Report {
	rep := &Report{Suite: s.Codename, External: map[string][]string{}}
	// The names the repository lists: a name the parent listed stays the repository's
	// own, so that removing what others depend on is refused, not taken from outside.
	known := names(s.Release)
	for n := range names(s.Parent) {
		known[n] = true
	}
	for _, arch := range s.Architectures {
		u, repo := s.universe(s.Release, arch, known)
		targets := repo
		if s.Parent != nil {
			targets = affected(u, repo, s.Release, s.Parent)
		}
		c := NewChecker(u)
		var parent *Checker
		var parentIDs map[identityKey]int32
		for _, id := range targets {
			rep.Checked++
			p := u.Package(id)
			if !s.HasBase {
				noteExternal(rep.External, p, known)
			}
			if c.Installable(id) {
				continue
			}
			f := Finding{Package: p, Architecture: arch, Reasons: u.Explain(id)}
			if s.Parent != nil {
				if parent == nil {
					pu, pids := s.universe(s.Parent, arch, known)
					parent, parentIDs = NewChecker(pu), map[identityKey]int32{}
					for _, id := range pids {
						parentIDs[identity(pu.Package(id))] = id
					}
				}
				if pid, ok := parentIDs[identity(p)]; ok && !parent.Installable(pid) {
					f.Existing = true
				}
			}
			rep.Broken = append(rep.Broken, f)
		}
	}
	return rep
}

// identityKey names a package by what it is, its .deb included.
type identityKey struct{ name, version, arch, sha string }

func identity(p *Package) identityKey {
	return identityKey{p.Name, p.Version, p.Architecture, p.SHA256}
}

// universe makes the universe of pkgs and the base for arch, and returns the ids of
// pkgs' packages in it.
func (s *Suite) universe(pkgs []Package, arch string, known map[string]bool) (*Universe, []int32) {
	all := make([]*Package, 0, len(pkgs)+len(s.Base[arch]))
	for i := range pkgs {
		if p := &pkgs[i]; p.Architecture == arch || p.Architecture == "all" {
			all = append(all, p)
		}
	}
	n := len(all)
	for i := range s.Base[arch] {
		all = append(all, &s.Base[arch][i])
	}
	u := newUniverse(all, n, arch)
	u.Elsewhere = func(name string) []string {
		var out []string
		for i := range pkgs {
			if p := &pkgs[i]; p.Name == name && p.Architecture != arch && p.Architecture != "all" {
				out = append(out, p.Version+" ("+p.Architecture+")")
			}
		}
		return out
	}
	if !s.HasBase {
		u.External = func(name string) bool { return !known[name] }
	}
	ids := make([]int32, u.repo)
	for i := range ids {
		ids[i] = int32(i)
	}
	return u, ids
}

// names returns every name the packages have or provide.
func names(pkgs []Package) map[string]bool {
	out := make(map[string]bool, len(pkgs))
	for i := range pkgs {
		out[pkgs[i].Name] = true
		for _, pr := range pkgs[i].Provides {
			out[pr.Name] = true
		}
	}
	return out
}

// noteExternal records the names p's dependencies take from outside the suite.
func noteExternal(ext map[string][]string, p *Package, known map[string]bool) {
	for _, field := range p.depFields() {
		for _, alts := range field {
			for _, r := range alts {
				if !known[r.Name] {
					if l := ext[r.Name]; len(l) == 0 || l[len(l)-1] != p.ID() {
						ext[r.Name] = append(l, p.ID())
					}
				}
			}
		}
	}
}

// affected returns the ids of repository packages (repo) a change from parent to
// release can have made uninstallable: those added or changed, and those that depend,
// directly or through others, on a name a removed package had or provided. Adding a
// package never makes another uninstallable (no installation has to take it), unless it
// is Essential, which binds every installation: then every package is affected.
func affected(u *Universe, repo []int32, release, parent []Package) []int32 {
	before := make(map[identityKey]bool, len(parent))
	for i := range parent {
		before[identity(&parent[i])] = true
	}
	after := make(map[identityKey]bool, len(release))
	for i := range release {
		after[identity(&release[i])] = true
	}
	var out []int32
	for _, id := range repo {
		p := u.Package(id)
		if !before[identity(p)] {
			if p.Essential {
				return repo
			}
			out = append(out, id)
		}
	}
	var gone []string // names removed packages had or provided
	for i := range parent {
		if p := &parent[i]; !after[identity(p)] {
			gone = append(gone, p.Name)
			for _, pr := range p.Provides {
				gone = append(gone, pr.Name)
			}
		}
	}
	if len(gone) == 0 {
		return out
	}
	rdeps := map[string][]int32{}
	for _, id := range repo {
		p := u.Package(id)
		for _, field := range p.depFields() {
			for _, alts := range field {
				for _, r := range alts {
					rdeps[r.Name] = append(rdeps[r.Name], id)
				}
			}
		}
	}
	seen := map[int32]bool{}
	for _, id := range out {
		seen[id] = true
	}
	for len(gone) > 0 {
		n := gone[len(gone)-1]
		gone = gone[:len(gone)-1]
		for _, id := range rdeps[n] {
			if seen[id] {
				continue
			}
			seen[id] = true
			out = append(out, id)
			p := u.Package(id)
			gone = append(gone, p.Name)
			for _, pr := range p.Provides {
				gone = append(gone, pr.Name)
			}
		}
	}
	slices.Sort(out)
	return out
}

// String renders a finding for a person.
func (f *Finding) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s in %s cannot be installed on %s", f.Package.ID(), f.Package.From, f.Architecture)
	if f.Existing {
		b.WriteString(" (nor could it in the parent release)")
	}
	b.WriteString(":")
	for _, r := range f.Reasons {
		b.WriteString("\n    ")
		b.WriteString(r)
	}
	return b.String()
}
