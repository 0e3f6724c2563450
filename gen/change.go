package gen

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/armor-apt/armor/gen/inputs"
	"github.com/armor-apt/armor/manifest"
	"pault.ag/go/debian/version"
)

// A release is its parent plus a change. The change is what the inputs add, and the
// explicit operations below; a package of the parent leaves only through a Removal,
// through a suite's retention (Suite.KeepVersions), or because its suite mirrors its
// inputs (Suite.Sync) and its file is gone.

// Addition is a file added to one suite's component beyond its input patterns
// (`armor add FILE`).
type Addition struct {
	Suite, Component string // Suite is a codename
	Path             string
}

// Removal takes packages out of the release (`armor remove NAME[=VERSION]`). Empty
// fields match anything.
type Removal struct {
	Name                                    string
	Version, Suite, Component, Architecture string
}

func (r Removal) String() string {
	s := r.Name
	if r.Version != "" {
		s += "=" + r.Version
	}
	var where []string
	for _, f := range [][2]string{{"suite", r.Suite}, {"component", r.Component}, {"architecture", r.Architecture}} {
		if f[1] != "" {
			where = append(where, f[0]+" "+f[1])
		}
	}
	if len(where) > 0 {
		s += " (" + strings.Join(where, ", ") + ")"
	}
	return s
}

func (r Removal) matches(p *manifest.Package) bool {
	return p.Name == r.Name &&
		(r.Version == "" || p.Version == r.Version) &&
		(r.Suite == "" || p.Suite == r.Suite) &&
		(r.Component == "" || p.Component == r.Component) &&
		(r.Architecture == "" || p.Architecture == r.Architecture)
}

// Copy lists packages of one suite's component in another as well (`armor copy`), by
// reference: the pool file stays where it is, so nothing is uploaded again. Without a
// Version, the newest version of each architecture is copied.
type Copy struct {
	Name, Version        string
	FromSuite, FromComp  string
	ToSuite, ToComponent string
}

func (c Copy) String() string {
	s := c.Name
	if c.Version != "" {
		s += "=" + c.Version
	}
	return fmt.Sprintf("%s from %s/%s to %s/%s", s, c.FromSuite, c.FromComp, c.ToSuite, c.ToComponent)
}

// ErrNotFound wraps the error of a Removal or Copy that matches no package.
var ErrNotFound = errors.New("no such package")

// ErrTooManyRemovals wraps the error of a build that would remove a larger share of a
// syncing suite's packages than its Suite.MaxRemovals allows.
var ErrTooManyRemovals = errors.New("too many removals")

// change is what a build changes of its parent beyond adding its inputs, as the options
// say it.
type change struct {
	base          string // Options.BaseDir, which input patterns are relative to
	suites        []Suite
	add           []Addition
	remove        []Removal
	copy          []Copy
	phase         []Phase
	reference     []manifest.Package
	allowRemovals bool
	suggestFlags  string // Options.SuggestFlags
}

func (o *Options) change() change {
	return change{o.BaseDir, o.Suites, o.Add, o.Remove, o.Copy, o.Phase, o.Reference, o.AllowRemovals, o.SuggestFlags}
}

// changeStats counts what the change did beyond the inputs.
type changeStats struct {
	removed, copied, pruned int
}

// applyChange makes the release's package list: the parent's packages, less those of
// components that mirror their inputs (Suite.Sync), suites, components or architectures
// no longer configured and removals; plus the inputs (which replace the parent's entry of
// the same package, and must have its bytes); plus copies; less what retention prunes.
func applyChange(ch change, prev *manifest.Manifest, inputs packageList) (packageList, changeStats, error) {
	var st changeStats
	suites := make(map[string]*Suite, len(ch.suites))
	for i := range ch.suites {
		suites[ch.suites[i].Codename] = &ch.suites[i]
	}
	// The parent's packages that stay: configured, not mirrored from inputs, not removed.
	// They are marked, not copied: at 100,000 packages a copy of the list was 16 MB.
	removed := make([]bool, len(ch.remove))
	var carried []manifest.Package
	var stays []bool // of each of carried
	if prev != nil {
		carried, stays = prev.Packages, make([]bool, len(prev.Packages))
		for i := range carried {
			p := &carried[i]
			gone := false
			for k, r := range ch.remove {
				if r.matches(p) {
					removed[k], gone = true, true
				}
			}
			s := suites[p.Suite]
			switch {
			case s == nil || !slices.Contains(s.Components, p.Component) ||
				(p.Architecture != "all" && p.Architecture != "source" && !slices.Contains(s.Architectures, p.Architecture)):
				// No longer configured: the configuration changed.
			case gone:
				st.removed++
			case !s.Sync || ch.explicit():
				// An explicit change (armor add, remove, copy, phase, a rebase) is the
				// parent plus it: a syncing suite loses nothing else by it, so a runner
				// holding only new files, or none, can make it.
				stays[i] = true
			}
		}
	}
	// A removal must have removed something, and an input must not bring it back.
	for k, r := range ch.remove {
		for i := range inputs.list {
			if r.matches(&inputs.list[i]) {
				return packageList{}, st, fmt.Errorf("remove %s: %s is still an input of %s/%s and would be published again: delete the file (or move it out of the inputs' patterns) and run the command again",
					r, inputs.from[i].Path, inputs.list[i].Suite, inputs.list[i].Component)
			}
		}
		if !removed[k] {
			return packageList{}, st, fmt.Errorf("remove %s: %w in the parent release; nothing was changed", r, ErrNotFound)
		}
	}
	out, err := mergeInputs(carried, stays, inputs)
	if err != nil {
		return packageList{}, st, err
	}
	for _, p := range ch.reference {
		if err := reference(&out, p); err != nil {
			return packageList{}, st, err
		}
	}
	for _, c := range ch.copy {
		n, err := copyPackages(&out, c, suites)
		if err != nil {
			return packageList{}, st, err
		}
		st.copied += n
	}
	inheritPhases(&out, prev)
	if err := applyPhases(&out, ch.phase); err != nil {
		return packageList{}, st, err
	}
	st.pruned = prune(&out, ch.suites)
	return out, st, nil
}

// mergeInputs merges the parent's packages that stay (those of carried whose stays is
// set) and the inputs, both in canonical order. An input of a package the parent lists
// replaces it; it must be the same file.
func mergeInputs(carried []manifest.Package, stays []bool, in packageList) (packageList, error) {
	n := 0
	for _, s := range stays {
		if s {
			n++
		}
	}
	out := packageList{
		list: make([]manifest.Package, 0, n+len(in.list)),
		from: make([]*inputs.Input, 0, n+len(in.list)),
	}
	i, j := 0, 0
	for {
		for i < len(carried) && !stays[i] {
			i++
		}
		if i == len(carried) && j == len(in.list) {
			break
		}
		c := 1
		switch {
		case i == len(carried):
			c = 1
		case j == len(in.list):
			c = -1
		default:
			c = manifest.CompareKeys(&carried[i], &in.list[j])
		}
		switch {
		case c < 0:
			out.list, out.from = append(out.list, carried[i]), append(out.from, nil)
			i++
		case c > 0:
			out.list, out.from = append(out.list, in.list[j]), append(out.from, in.from[j])
			j++
		default:
			p, q := carried[i], in.list[j]
			if p.SHA256 != q.SHA256 {
				return packageList{}, fmt.Errorf("%w: %s is %s %s (%s), already published in %s/%s with different contents; apt clients holding the previous index would get a hash sum mismatch: give the new build a new version (for example a +b1 binNMU suffix), or `armor remove %s=%s` first",
					ErrConflict, in.from[j].Path, q.Name, q.Version, q.Architecture, p.Suite, p.Component, p.Name, p.Version)
			}
			out.list, out.from = append(out.list, q), append(out.from, in.from[j])
			i++
			j++
		}
	}
	return out, nil
}

// reference lists p as it is, unless the list has it already.
func reference(pkgs *packageList, p manifest.Package) error {
	i, found := slices.BinarySearchFunc(pkgs.list, &p, byKey)
	if found {
		if pkgs.list[i].SHA256 != p.SHA256 {
			return fmt.Errorf("%w: %s %s (%s) in %s/%s is listed with other contents than the change being applied again",
				ErrConflict, p.Name, p.Version, p.Architecture, p.Suite, p.Component)
		}
		pkgs.list[i].Phased = p.Phased // the change may be a new phasing
		return nil
	}
	pkgs.list = slices.Insert(pkgs.list, i, p)
	pkgs.from = slices.Insert(pkgs.from, i, (*inputs.Input)(nil))
	return nil
}

// Replay returns the change that made built from parent (nil for a first build), to
// apply again on another parent (a rebase): the packages built lists that parent does not
// list as they are, and the identities parent lists that built does not.
func Replay(parent, built *manifest.Manifest) (added []manifest.Package, removed []manifest.Key) {
	var old []manifest.Package
	if parent != nil {
		old = parent.Packages
	}
	cur := built.Packages
	pairUp(old, cur, func(i, j int) {
		switch {
		case j < 0:
			removed = append(removed, old[i].Key())
		case i < 0 || !old[i].Equal(&cur[j]):
			added = append(added, cur[j])
		}
	})
	return added, removed
}

// pairUp walks two package lists in canonical order together and calls f for each
// identity either lists: with its index in old and in cur, -1 for the list that lacks it.
func pairUp(old, cur []manifest.Package, f func(i, j int)) {
	i, j := 0, 0
	for i < len(old) || j < len(cur) {
		c := 0
		switch {
		case i == len(old):
			c = 1
		case j == len(cur):
			c = -1
		default:
			c = manifest.CompareKeys(&old[i], &cur[j])
		}
		switch {
		case c < 0:
			f(i, -1)
			i++
		case c > 0:
			f(-1, j)
			j++
		default:
			f(i, j)
			i++
			j++
		}
	}
}

// copyPackages adds the packages c selects to its target, and returns how many it added.
func copyPackages(pkgs *packageList, c Copy, suites map[string]*Suite) (int, error) {
	from, to := suites[c.FromSuite], suites[c.ToSuite]
	switch {
	case from == nil:
		return 0, fmt.Errorf("copy %s: no suite %q in the configuration", c, c.FromSuite)
	case to == nil:
		return 0, fmt.Errorf("copy %s: no suite %q in the configuration", c, c.ToSuite)
	case !slices.Contains(from.Components, c.FromComp):
		return 0, fmt.Errorf("copy %s: suite %s has no component %q", c, c.FromSuite, c.FromComp)
	case !slices.Contains(to.Components, c.ToComponent):
		return 0, fmt.Errorf("copy %s: suite %s has no component %q", c, c.ToSuite, c.ToComponent)
	case c.FromSuite == c.ToSuite && c.FromComp == c.ToComponent:
		return 0, fmt.Errorf("copy %s: source and target are the same", c)
	}
	// The selected packages: the version asked for, or the newest of each architecture.
	var sel []manifest.Package
	newest := map[string]int{} // architecture → index in sel
	for _, p := range pkgs.list {
		if p.Suite != c.FromSuite || p.Component != c.FromComp || p.Name != c.Name {
			continue
		}
		if c.Version != "" {
			if p.Version == c.Version {
				sel = append(sel, p)
			}
			continue
		}
		if k, ok := newest[p.Architecture]; ok {
			if compareVersions(p.Version, sel[k].Version) > 0 {
				sel[k] = p
			}
			continue
		}
		newest[p.Architecture] = len(sel)
		sel = append(sel, p)
	}
	if len(sel) == 0 {
		return 0, fmt.Errorf("copy %s: %w in %s/%s; nothing was changed", c, ErrNotFound, c.FromSuite, c.FromComp)
	}
	added := 0
	for _, p := range sel {
		if p.Architecture != "all" && p.Architecture != "source" && !slices.Contains(to.Architectures, p.Architecture) {
			return 0, fmt.Errorf("copy %s: architecture %s of %s %s is not one of suite %s's architectures (%s)",
				c, p.Architecture, p.Name, p.Version, c.ToSuite, strings.Join(to.Architectures, ", "))
		}
		p.Suite, p.Component = c.ToSuite, c.ToComponent
		i, found := slices.BinarySearchFunc(pkgs.list, &p, byKey)
		if found {
			if pkgs.list[i].SHA256 != p.SHA256 {
				return 0, fmt.Errorf("%w: copy %s: %s/%s already has %s %s (%s) with different contents",
					ErrConflict, c, c.ToSuite, c.ToComponent, p.Name, p.Version, p.Architecture)
			}
			continue // there already
		}
		pkgs.list = slices.Insert(pkgs.list, i, p)
		pkgs.from = slices.Insert(pkgs.from, i, (*inputs.Input)(nil))
		added++
	}
	return added, nil
}

// prune applies each suite's retention: of every package name and architecture in a
// component, only the newest KeepVersions versions stay. It returns how many it removed.
func prune(pkgs *packageList, suites []Suite) int {
	keep := map[string]int{}
	for _, s := range suites {
		if s.KeepVersions > 0 {
			keep[s.Codename] = s.KeepVersions
		}
	}
	if len(keep) == 0 {
		return 0
	}
	// Canonical order groups a name's versions within a component, architectures
	// interleaved: count per architecture within each run of one name.
	drop := make([]bool, len(pkgs.list))
	n := 0
	for lo := 0; lo < len(pkgs.list); {
		p := pkgs.list[lo]
		hi := lo + 1
		for hi < len(pkgs.list) && pkgs.list[hi].Suite == p.Suite && pkgs.list[hi].Component == p.Component && pkgs.list[hi].Name == p.Name {
			hi++
		}
		if k := keep[p.Suite]; k > 0 && hi-lo > k {
			run := make([]int, 0, hi-lo)
			for i := lo; i < hi; i++ {
				run = append(run, i)
			}
			// Newest first within each architecture.
			slices.SortStableFunc(run, func(a, b int) int {
				x, y := pkgs.list[a], pkgs.list[b]
				return cmp.Or(strings.Compare(x.Architecture, y.Architecture), compareVersions(y.Version, x.Version))
			})
			seen := 0
			for i, idx := range run {
				if i > 0 && pkgs.list[run[i-1]].Architecture != pkgs.list[idx].Architecture {
					seen = 0
				}
				seen++
				if seen > k {
					drop[idx] = true
					n++
				}
			}
		}
		lo = hi
	}
	if n == 0 {
		return 0
	}
	out := packageList{list: pkgs.list[:0], from: pkgs.from[:0]}
	for i := range drop {
		if !drop[i] {
			out.list, out.from = append(out.list, pkgs.list[i]), append(out.from, pkgs.from[i])
		}
	}
	*pkgs = out
	return n
}

// compareVersions orders Debian versions; a version that does not parse sorts as a plain
// string after those that do (the .deb reader refuses such versions, so this is a guard).
func compareVersions(a, b string) int {
	va, errA := version.Parse(a)
	vb, errB := version.Parse(b)
	switch {
	case errA == nil && errB == nil:
		return version.Compare(va, vb)
	case errA == nil:
		return -1
	case errB == nil:
		return 1
	}
	return strings.Compare(a, b)
}

// checkRemovals refuses a build that would remove more of a syncing suite's packages than
// its MaxRemovals share: a runner whose input directory is empty or half-filled would
// otherwise publish a repository without its packages.
func checkRemovals(ch change, prev *manifest.Manifest, pkgs []manifest.Package) error {
	if prev == nil || ch.allowRemovals {
		return nil
	}
	syncing, keep := map[string]float64{}, map[string]int{}
	for _, s := range ch.suites {
		if s.Sync {
			syncing[s.Codename] = cmp.Or(s.MaxRemovals, DefaultMaxRemovals)
			keep[s.Codename] = s.KeepVersions
		}
	}
	if len(syncing) == 0 {
		return nil
	}
	// Both lists are in canonical order: one walk counts, per suite, the parent's
	// packages and those the release no longer lists.
	before, gone := map[string]int{}, map[string][]*manifest.Package{}
	j := 0
	for i := range prev.Packages {
		p := &prev.Packages[i]
		if _, ok := syncing[p.Suite]; !ok {
			continue
		}
		before[p.Suite]++
		for j < len(pkgs) && manifest.CompareKeys(&pkgs[j], p) < 0 {
			j++
		}
		if (j == len(pkgs) || manifest.CompareKeys(&pkgs[j], p) != 0) && !pruned(pkgs, j, p, keep[p.Suite]) &&
			!slices.ContainsFunc(ch.remove, func(r Removal) bool { return r.matches(p) }) {
			gone[p.Suite] = append(gone[p.Suite], p)
		}
	}
	for _, s := range ch.suites {
		share, n, g := syncing[s.Codename], before[s.Codename], gone[s.Codename]
		if !s.Sync || n == 0 || share >= 1 || float64(len(g)) <= share*float64(n) {
			continue
		}
		var shown []string
		for _, p := range g[:min(len(g), 5)] {
			shown = append(shown, fmt.Sprintf("%s %s (%s) in %s", p.Name, p.Version, p.Architecture, p.Component))
		}
		more := ""
		if len(g) > len(shown) {
			more = fmt.Sprintf(" and %d more", len(g)-len(shown))
		}
		return fmt.Errorf("%w: suite %s mirrors its inputs (sync = true), and %d of its %d packages are no longer among them (%s%s), more than the %g%% it may remove at once (max_removals). A sync suite needs every one of its files among the inputs, on a CI runner too: build them all there, or publish only the new files with `armor add FILE... --suite %s%s` (the parent plus these files; nothing is removed); or, if the removals are intended, `armor build --allow-removals%s`",
			ErrTooManyRemovals, s.Codename, len(g), n, strings.Join(shown, ", "), more, share*100, s.Codename, ch.suggestFlags, ch.suggestFlags)
	}
	return nil
}

// pruned reports whether retention (keep versions per package) took p out of pkgs rather
// than its file going from the inputs: pkgs lists keep newer versions of p's package and
// architecture in its component. at is where p would stand in pkgs.
func pruned(pkgs []manifest.Package, at int, p *manifest.Package, keep int) bool {
	if keep <= 0 {
		return false
	}
	same := func(q *manifest.Package) bool {
		return q.Suite == p.Suite && q.Component == p.Component && q.Name == p.Name
	}
	newer := 0
	for _, step := range []int{-1, 1} {
		i := at
		if step < 0 {
			i--
		}
		for ; i >= 0 && i < len(pkgs) && same(&pkgs[i]); i += step {
			if pkgs[i].Architecture == p.Architecture && compareVersions(pkgs[i].Version, p.Version) > 0 {
				newer++
			}
		}
	}
	return newer >= keep
}

// DefaultMaxRemovals is the share of a syncing suite's packages one build may remove
// without --allow-removals.
const DefaultMaxRemovals = 0.10

// explicit reports whether the build is an explicit change (files added, packages
// removed, copied, phased, or referenced by a rebase), which sync does not apply to.
func (ch change) explicit() bool {
	return len(ch.add)+len(ch.remove)+len(ch.copy)+len(ch.phase)+len(ch.reference) > 0
}
