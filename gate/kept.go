package gate

import (
	"cmp"
	"context"

	"github.com/armor-apt/armor/debian/relation"
	"pault.ag/go/debian/version"
)

// Change describes a release and its parent as a snapshot changed: each is the
// snapshot's packages but some (Gone, indexes in the snapshot), with some more (Extra).
// Added and Removed are the change from the parent to the release.
type Change struct {
	ParentGone, ReleaseGone   []int
	ParentExtra, ReleaseExtra []*Package
	// Added holds the indexes in ReleaseExtra of the packages the parent lacks; Removed
	// the parent's packages the release lacks.
	Added   []int
	Removed []*Package
}

// Check checks the release c describes as Check does a suite without a base, given its
// parent and the change: only the packages the change can affect. It reads of the
// snapshot only what the check reaches; a package that does not read (see Snapshot) is
// an error wrapping ErrSnapshot.
func (s *Snapshot) Check(ctx context.Context, c *Change) (*Report, error) {
	rep := &Report{Suite: s.Suite, External: map[string][]string{}}
	releaseGone, parentGone := indexSet(c.ReleaseGone), indexSet(c.ParentGone)
	known := s.knownNames(releaseGone, c.ReleaseExtra, c.Removed)
	for _, a := range s.archs {
		u, extraIDs := s.universe(a, releaseGone, c.ReleaseExtra)
		external := func(name string) bool { return !known(name) }
		u.External = external
		u.Elsewhere = s.elsewhere(a.name, releaseGone, c.ReleaseExtra)
		var pu *Universe
		parent := func() *Universe {
			pu, _ = s.universe(a, parentGone, c.ParentExtra)
			pu.External = external
			return pu
		}
		if err := judge(ctx, rep, u, a.name, u.changed(extraIDs, c.Added, c.Removed), parent, known, false); err != nil {
			return nil, err
		}
		if pu != nil && pu.err != nil {
			return nil, pu.err
		}
	}
	rep.sortExternal()
	return rep, nil
}

func indexSet(ks []int) map[int]bool {
	out := make(map[int]bool, len(ks))
	for _, k := range ks {
		out[k] = true
	}
	return out
}

// universe returns the universe of a's packages but those gone (indexes in the
// snapshot), with those of extra of a's architecture after them; and the id of each of
// extra, -1 for one of another architecture.
func (s *Snapshot) universe(a *snapArch, gone map[int]bool, extra []*Package) (*Universe, []int32) {
	m := a.len()
	u := &Universe{
		Native: a.name, archs: []string{a.name}, snap: s, sa: a,
		provided: map[string][]provide{}, conflicters: map[string][]int32{}, memo: map[string][]int32{},
		gone: map[int32]bool{}, xByName: map[string][]int32{}, xProvided: map[string][]provide{}, xConfl: map[string][]int32{},
	}
	for k := range gone {
		id := searchIndex(m, func(j int) int { return cmp.Compare(a.pkg(int32(j)), k) })
		if id < m && a.pkg(int32(id)) == k {
			u.gone[int32(id)] = true
		}
	}
	u.pkgs = make([]*Package, m, m+len(extra))
	ids := make([]int32, len(extra))
	for i, p := range extra {
		ids[i] = -1
		if p.Architecture != a.name && p.Architecture != "all" {
			continue
		}
		id := int32(len(u.pkgs))
		ids[i] = id
		u.pkgs = append(u.pkgs, p)
		u.xByName[p.Name] = append(u.xByName[p.Name], id)
		for _, pr := range p.Provides {
			pv := provide{pkg: id}
			if pr.Op == relation.Equal {
				pv.versioned = true
				pv.ver, _ = version.Parse(pr.Version)
			}
			u.xProvided[pr.Name] = append(u.xProvided[pr.Name], pv)
		}
		for _, c := range append(p.Conflicts[:len(p.Conflicts):len(p.Conflicts)], p.Breaks...) {
			u.xConfl[c.Name] = appendOnce(u.xConfl[c.Name], id)
		}
	}
	u.repo = len(u.pkgs)
	essential := map[string]int{}
	addEssential := func(name string, id int32) {
		j, ok := essential[name]
		if !ok {
			j = len(u.essential)
			essential[name] = j
			u.essential = append(u.essential, nil)
		}
		u.essential[j] = append(u.essential[j], id)
	}
	for k := 0; k < len(a.essential)/4; k++ {
		if id := int32(u32at(a.essential, 4*k)); !u.gone[id] {
			addEssential(s.field(a.pkg(id), fName), id)
		}
	}
	for id := int32(m); id < int32(len(u.pkgs)); id++ {
		if p := u.pkgs[id]; p.Essential {
			addEssential(p.Name, id)
		}
	}
	u.deps = make([][][]int32, len(u.pkgs))
	u.confl = make([][]int32, len(u.pkgs))
	u.done = make([]uint8, len(u.pkgs))
	return u, ids
}

// decode reads package id from the snapshot; the first that does not read is u.err.
func (u *Universe) decode(id int32) *Package {
	p, err := u.snap.Package(u.sa.pkg(id))
	if err != nil && u.err == nil {
		u.err = err
	}
	u.pkgs[id] = p
	return p
}

// changed returns the ids of the packages a change can have made uninstallable, as
// affected does: those added (extraIDs of the indexes added), and those that depend,
// directly or through others, on a name a removed package had or provided; every
// package if one added is Essential.
func (u *Universe) changed(extraIDs []int32, added []int, removed []*Package) []int32 {
	var out []int32
	for _, i := range added {
		id := extraIDs[i]
		if id < 0 {
			continue
		}
		if u.pkg(id).Essential {
			all := make([]int32, 0, u.Len())
			for id := range int32(u.Len()) {
				if !u.gone[id] {
					all = append(all, id)
				}
			}
			return all
		}
		out = append(out, id)
	}
	var gone []string
	for _, p := range removed {
		gone = append(gone, p.Name)
		for _, pr := range p.Provides {
			gone = append(gone, pr.Name)
		}
	}
	if len(gone) == 0 {
		return dedupSorted(out)
	}
	extraRdeps := map[string][]int32{}
	for id := int32(u.sa.len()); id < int32(u.Len()); id++ {
		addRdeps(extraRdeps, id, u.pkgs[id])
	}
	seen := map[int32]bool{}
	for _, id := range out {
		seen[id] = true
	}
	for len(gone) > 0 {
		n := gone[len(gone)-1]
		gone = gone[:len(gone)-1]
		lo, hi := u.snap.entries(u.sa.rdeps, n)
		rdeps := make([]int32, 0, hi-lo)
		for k := lo; k < hi; k++ {
			rdeps = append(rdeps, u.sa.rdeps.id(k))
		}
		for _, id := range append(u.present(rdeps), extraRdeps[n]...) {
			if seen[id] {
				continue
			}
			seen[id] = true
			out = append(out, id)
			p := u.pkg(id)
			gone = append(gone, p.Name)
			for _, pr := range p.Provides {
				gone = append(gone, pr.Name)
			}
		}
	}
	return dedupSorted(out)
}

// knownNames is Suite.knownNames for a release the snapshot describes: whether a
// package of the release (the snapshot's but those gone, and extra) or one removed has
// or provides a name.
func (s *Snapshot) knownNames(gone map[int]bool, extra, removed []*Package) func(string) bool {
	memo := map[string]bool{}
	lists := func(pkgs []*Package, name string) bool {
		for _, p := range pkgs {
			if p.Name == name {
				return true
			}
			for _, pr := range p.Provides {
				if pr.Name == name {
					return true
				}
			}
		}
		return false
	}
	return func(name string) bool {
		k, ok := memo[name]
		if !ok {
			lo, hi := s.entries(s.names, name)
			for j := lo; j < hi && !k; j++ {
				k = !gone[int(s.names.id(j))]
			}
			k = k || lists(extra, name) || lists(removed, name)
			memo[name] = k
		}
		return k
	}
}

// elsewhere is Universe.Elsewhere for arch's universe: the release's packages of the
// name of other architectures.
func (s *Snapshot) elsewhere(arch string, gone map[int]bool, extra []*Package) func(string) []string {
	other := func(a string) bool { return a != arch && a != "all" }
	return func(name string) []string {
		var out []string
		lo, hi := s.entries(s.names, name)
		for j := lo; j < hi; j++ {
			k := int(s.names.id(j))
			if a := s.field(k, fArch); !gone[k] && s.field(k, fName) == name && other(a) {
				out = append(out, s.field(k, fVersion)+" ("+a+")")
			}
		}
		for _, p := range extra {
			if p.Name == name && other(p.Architecture) {
				out = append(out, p.Version+" ("+p.Architecture+")")
			}
		}
		return out
	}
}
