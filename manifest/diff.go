package manifest

import (
	"cmp"
	"slices"
	"strings"

	"pault.ag/go/debian/version"
)

// Change kinds.
const (
	Added      = "added"
	Removed    = "removed"
	Upgraded   = "upgraded"
	Downgraded = "downgraded"
	Rebuilt    = "rebuilt" // same version, different file
)

// Change is one package's difference between two releases, within one suite, component
// and architecture.
type Change struct {
	Suite        string `json:"suite"`
	Component    string `json:"component"`
	Architecture string `json:"architecture"`
	Name         string `json:"name"`
	Kind         string `json:"kind"`
	Old          string `json:"old,omitempty"` // version before
	New          string `json:"new,omitempty"` // version after
}

// Diff compares the packages of two releases. A package whose only version changed is one
// upgrade or downgrade; when several versions of a name coexist, versions are matched
// pairwise and the rest are additions or removals. Either manifest may be nil (empty).
func Diff(old, new *Manifest) []Change {
	type group struct{ suite, comp, arch, name string }
	var a, b []Package
	if old != nil {
		a = old.Packages
	}
	if new != nil {
		b = new.Packages
	}
	// An entry both lists hold, identical, changes nothing, whatever else its name's group
	// holds: leave out those at the lists' ends. A release usually differs from its parent
	// in a few packages, and the rest would cost two maps of every package.
	for len(a) > 0 && len(b) > 0 && a[0].Equal(&b[0]) {
		a, b = a[1:], b[1:]
	}
	for len(a) > 0 && len(b) > 0 && a[len(a)-1].Equal(&b[len(b)-1]) {
		a, b = a[:len(a)-1], b[:len(b)-1]
	}
	versions := func(pkgs []Package) map[group]map[string]string {
		out := map[group]map[string]string{}
		for _, p := range pkgs {
			g := group{p.Suite, p.Component, p.Architecture, p.Name}
			if out[g] == nil {
				out[g] = map[string]string{}
			}
			out[g][p.Version] = p.SHA256
		}
		return out
	}
	before, after := versions(a), versions(b)
	groups := map[group]bool{}
	for g := range before {
		groups[g] = true
	}
	for g := range after {
		groups[g] = true
	}
	var out []Change
	for g := range groups {
		b, a := before[g], after[g]
		var gone, came []string
		for v, sum := range b {
			if s, ok := a[v]; !ok {
				gone = append(gone, v)
			} else if s != sum {
				out = append(out, Change{g.suite, g.comp, g.arch, g.name, Rebuilt, v, v})
			}
		}
		for v := range a {
			if _, ok := b[v]; !ok {
				came = append(came, v)
			}
		}
		byVersion := func(x, y string) int { return compareVersions(x, y) }
		slices.SortFunc(gone, byVersion)
		slices.SortFunc(came, byVersion)
		for len(gone) > 0 && len(came) > 0 {
			o, n := gone[len(gone)-1], came[len(came)-1]
			kind := Upgraded
			if compareVersions(n, o) < 0 {
				kind = Downgraded
			}
			out = append(out, Change{g.suite, g.comp, g.arch, g.name, kind, o, n})
			gone, came = gone[:len(gone)-1], came[:len(came)-1]
		}
		for _, v := range gone {
			out = append(out, Change{g.suite, g.comp, g.arch, g.name, Removed, v, ""})
		}
		for _, v := range came {
			out = append(out, Change{g.suite, g.comp, g.arch, g.name, Added, "", v})
		}
	}
	slices.SortFunc(out, func(x, y Change) int {
		return cmp.Or(
			strings.Compare(x.Suite, y.Suite),
			strings.Compare(x.Component, y.Component),
			strings.Compare(x.Architecture, y.Architecture),
			strings.Compare(x.Name, y.Name),
			compareVersions(x.Old, y.Old),
			compareVersions(x.New, y.New),
		)
	})
	return out
}

// compareVersions orders Debian versions, falling back to string order for versions
// that do not parse. Only the sign of version.Compare is meaningful.
func compareVersions(a, b string) int {
	va, errA := version.Parse(a)
	vb, errB := version.Parse(b)
	if errA != nil || errB != nil {
		return strings.Compare(a, b)
	}
	return cmp.Compare(version.Compare(va, vb), 0)
}
