package gate

import (
	"context"
	"fmt"
	"github.com/armor-apt/armor/debian/relation"
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
	// Added and Removed are the change from Parent to Release, when the caller knows it
	// (a build does): the indexes in Release of the packages Parent lacks, and Parent's
	// packages Release lacks. Parent is then read only to tell breakage it had already.
	Added   []int
	Removed []Package
	// LoadParent, with Added, gives Parent when a finding needs it.
	LoadParent func() []Package
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
// added, and those that could depend on a package removed); without, every package. It
// stops with ctx's error once ctx is done.
func Check(ctx context.Context, s *Suite) (*Report, error) {
	rep := &Report{Suite: s.Codename, External: map[string][]string{}}
	known := s.knownNames()
	for _, arch := range s.Architectures {
		u, ids := s.universe(s.Release, arch, known)
		var parent func() *Universe
		if s.Parent != nil || s.Added != nil {
			parent = func() *Universe {
				if s.Parent == nil && s.LoadParent != nil {
					s.Parent = s.LoadParent()
				}
				pu, _ := s.universe(s.Parent, arch, known)
				return pu
			}
		}
		if err := judge(ctx, rep, u, arch, s.targets(u, ids), parent, known, s.HasBase); err != nil {
			return nil, err
		}
	}
	rep.sortExternal()
	return rep, nil
}

// sortExternal sorts the packages listed for each external name, and drops repeats (a
// package of "all", checked on each architecture).
func (r *Report) sortExternal() {
	for n, ids := range r.External {
		slices.Sort(ids)
		r.External[n] = slices.Compact(ids)
	}
}

// judge checks the packages targets of u, for arch, and adds what it finds to rep.
// parent, if set, makes the parent release's universe, for a finding, to tell whether
// the parent had the same package and could not install it either.
func judge(ctx context.Context, rep *Report, u *Universe, arch string, targets []int32, parent func() *Universe, known func(string) bool, hasBase bool) error {
	c := NewChecker(u)
	var pu *Universe
	var pc *Checker
	for _, id := range targets {
		rep.Checked++
		p := u.Package(id)
		if !hasBase {
			noteExternal(rep.External, u, p, known)
		}
		ok, err := c.Installable(ctx, id)
		if err != nil {
			return err
		}
		if ok {
			continue
		}
		f := Finding{Package: p, Architecture: arch, Reasons: u.Explain(id)}
		if parent != nil {
			if pu == nil {
				pu = parent()
				pc = NewChecker(pu)
			}
			for _, pid := range pu.Lookup(p.Name) {
				if int(pid) < pu.repo && identity(pu.Package(pid)) == identity(p) {
					had, err := pc.Installable(ctx, pid)
					if err != nil {
						return err
					}
					f.Existing = !had
					break
				}
			}
		}
		rep.Broken = append(rep.Broken, f)
	}
	return u.err
}

// knownNames returns whether the repository lists a name: a package of the release has
// or provides it, or one of the parent's did (a name the parent listed stays the
// repository's own, so that removing what others depend on is refused, not taken from
// outside). It is asked only of names a universe lacks, and remembers its answers.
func (s *Suite) knownNames() func(string) bool {
	gone := s.Removed
	if s.Added == nil {
		gone = s.Parent
	}
	memo := map[string]bool{}
	lists := func(pkgs []Package, name string) bool {
		for i := range pkgs {
			if p := &pkgs[i]; p.Name == name || slices.ContainsFunc(p.Provides, func(r relation.Relation) bool { return r.Name == name }) {
				return true
			}
		}
		return false
	}
	return func(name string) bool {
		k, ok := memo[name]
		if !ok {
			k = lists(s.Release, name) || lists(gone, name)
			memo[name] = k
		}
		return k
	}
}

// targets returns the ids of the packages to check: all of the repository's in u (ids:
// the universe id of each package of Release, -1 for none), or those the change can
// affect.
func (s *Suite) targets(u *Universe, ids []int32) []int32 {
	if s.Parent == nil && s.Added == nil {
		out := make([]int32, 0, len(ids))
		for _, id := range ids {
			if id >= 0 {
				out = append(out, id)
			}
		}
		return dedupSorted(out)
	}
	added, removed := s.Added, s.Removed
	if added == nil {
		added, removed = diff(s.Release, s.Parent)
	}
	return affected(u, ids, s.Release, added, removed)
}

// dedupSorted sorts ids and drops repeats (a package listed in two components).
func dedupSorted(ids []int32) []int32 {
	slices.Sort(ids)
	return slices.Compact(ids)
}

// diff returns the indexes in release of the packages parent lacks, and parent's
// packages release lacks.
func diff(release, parent []Package) (added []int, removed []Package) {
	before := make(map[identityKey]bool, len(parent))
	for i := range parent {
		before[identity(&parent[i])] = true
	}
	after := make(map[identityKey]bool, len(release))
	for i := range release {
		after[identity(&release[i])] = true
		if !before[identity(&release[i])] {
			added = append(added, i)
		}
	}
	for i := range parent {
		if !after[identity(&parent[i])] {
			removed = append(removed, parent[i])
		}
	}
	return added, removed
}

// identityKey names a package by what it is, its .deb included.
type identityKey struct{ name, version, arch, sha string }

func identity(p *Package) identityKey {
	return identityKey{p.Name, p.Version, p.Architecture, p.SHA256}
}

// universe makes the universe of pkgs and the base for arch, and returns the universe id
// of each of pkgs (-1 for one of another architecture).
func (s *Suite) universe(pkgs []Package, arch string, known func(string) bool) (*Universe, []int32) {
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
		u.External = func(name string) bool { return !known(name) }
	}
	ids := make([]int32, len(pkgs))
	next := int32(0)
	for i := range pkgs {
		ids[i] = -1
		if p := &pkgs[i]; p.Architecture == arch || p.Architecture == "all" {
			ids[i] = next
			next++
		}
	}
	return u, ids
}

// noteExternal records the names p's dependencies take from outside the suite.
func noteExternal(ext map[string][]string, u *Universe, p *Package, known func(string) bool) {
	for _, field := range p.depFields() {
		for _, alts := range field {
			for _, r := range alts {
				if !u.Known(r.Name) && !known(r.Name) {
					if l := ext[r.Name]; len(l) == 0 || l[len(l)-1] != p.ID() {
						ext[r.Name] = append(l, p.ID())
					}
				}
			}
		}
	}
}

// affected returns the ids of repository packages a change can have made
// uninstallable: those added (release indexes in added), and those that depend,
// directly or through others, on a name a removed package had or provided. Adding a
// package never makes another uninstallable (no installation has to take it), unless it
// is Essential, which binds every installation: then every package is affected.
func affected(u *Universe, ids []int32, release []Package, added []int, removed []Package) []int32 {
	var out []int32
	for _, i := range added {
		id := ids[i]
		if id < 0 {
			continue
		}
		if u.Package(id).Essential {
			return dedupSorted(slices.DeleteFunc(slices.Clone(ids), func(id int32) bool { return id < 0 }))
		}
		out = append(out, id)
	}
	var gone []string // names removed packages had or provided
	for i := range removed {
		gone = append(gone, removed[i].Name)
		for _, pr := range removed[i].Provides {
			gone = append(gone, pr.Name)
		}
	}
	if len(gone) == 0 {
		return dedupSorted(out)
	}
	rdeps := map[string][]int32{}
	for _, id := range ids {
		if id < 0 {
			continue
		}
		addRdeps(rdeps, id, u.Package(id))
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
	return dedupSorted(out)
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
