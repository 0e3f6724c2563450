package gate

import (
	"slices"
	"sort"

	"github.com/armor-apt/armor/debian/relation"
	"pault.ag/go/debian/version"
)

// Universe is the set of packages that one installation can draw from: those of a
// native architecture, of "all", and of the foreign architectures dpkg is told of. It
// answers, for each package, which packages can meet each of its dependencies and which
// it cannot be installed with, as dpkg and apt read Depends, Pre-Depends, Conflicts,
// Breaks, Provides and Multi-Arch (see matches). Answers are computed on first use and
// kept; a Universe is not safe for concurrent use.
type Universe struct {
	Native  string
	Foreign []string
	archs   []string // Native, then Foreign

	pkgs []*Package
	repo int // the first repo packages are the repository's (see newUniverse)
	// Packages by name: through byName when the packages came in no order; else, the
	// packages coming in runs sorted by name (a Packages index, a release's components),
	// by a binary search in each run (runs), which spares building a map of every name
	// for a check that looks up a few hundred.
	byName   map[string][]int32
	runs     []int32 // the start of each run, then len(pkgs)
	memo     map[string][]int32
	provided map[string][]provide // providers by provided name
	// conflicters lists, by name, the packages whose Conflicts or Breaks name it.
	conflicters map[string][]int32
	essential   [][]int32 // for each Essential name, its essential packages

	// Elsewhere, when set, tells what the repository has of a name beyond this universe
	// (other architectures), for explanations: "version (architecture)" each.
	Elsewhere func(name string) []string

	// External, when set, says whether a name that no package of the universe has or
	// provides is met from outside it (a repository checked without a base).
	External func(name string) bool

	deps  [][][]int32 // per package, once resolved: its dependencies' candidates
	confl [][]int32   // per package, once resolved: every package it cannot be installed with
	// ownConfl and ownDone: per package, what its own fields and name rule out (own).
	ownConfl [][]int32
	ownDone  []bool
	done     []uint8 // per package: depsDone | conflDone
	// A universe read from a snapshot (see Snapshot.universe): its packages are those
	// of sa but the ids in gone, then the packages added (pkgs[sa.len():]), whose
	// lookups are the x maps. Packages are read when first asked for; the first that
	// does not read is err, which the check returns.
	snap      *Snapshot
	sa        *snapArch
	gone      map[int32]bool
	xByName   map[string][]int32
	xProvided map[string][]provide
	xConfl    map[string][]int32
	err       error

	// DoseAny makes ":any" match as dose-distcheck 7 does (see matchReal): for
	// comparisons with it, never for a verdict.
	DoseAny bool
}

const (
	depsDone uint8 = 1 << iota
	conflDone
)

type provide struct {
	pkg       int32
	versioned bool
	ver       version.Version
}

// NewUniverse makes the universe of the packages of the native architecture, of the
// foreign ones and of "all" among pkgs; packages of other architectures are left out. A
// package listed twice (same name, version and architecture) is two packages alike,
// which changes no verdict. The universe keeps pointers into pkgs, which must not change
// while it is used.
func NewUniverse(pkgs []Package, native string, foreign ...string) *Universe {
	ptrs := make([]*Package, len(pkgs))
	for i := range pkgs {
		ptrs[i] = &pkgs[i]
	}
	return newUniverse(ptrs, len(ptrs), native, foreign...)
}

// newUniverse is NewUniverse of pointers; the first repo of them are the repository's,
// the others a base's.
func newUniverse(pkgs []*Package, repo int, native string, foreign ...string) *Universe {
	u := &Universe{
		Native: native, Foreign: foreign, archs: append([]string{native}, foreign...),
		provided: map[string][]provide{}, conflicters: map[string][]int32{}, memo: map[string][]int32{},
	}
	u.pkgs = make([]*Package, 0, len(pkgs))
	essential := map[string]int{}
	for i, p := range pkgs {
		if i == repo {
			u.repo = len(u.pkgs)
		}
		if p.Architecture != "all" && !slices.Contains(u.archs, p.Architecture) {
			continue
		}
		id := int32(len(u.pkgs))
		if id == 0 || p.Name < u.pkgs[id-1].Name {
			u.runs = append(u.runs, id)
		}
		u.pkgs = append(u.pkgs, p)
		for _, pr := range p.Provides {
			pv := provide{pkg: id}
			if pr.Op == relation.Equal {
				pv.versioned = true
				pv.ver, _ = version.Parse(pr.Version)
			}
			u.provided[pr.Name] = append(u.provided[pr.Name], pv)
		}
		for _, c := range p.Conflicts {
			u.conflicters[c.Name] = appendOnce(u.conflicters[c.Name], id)
		}
		for _, c := range p.Breaks {
			u.conflicters[c.Name] = appendOnce(u.conflicters[c.Name], id)
		}
		if p.Essential {
			j, ok := essential[p.Name]
			if !ok {
				j = len(u.essential)
				essential[p.Name] = j
				u.essential = append(u.essential, nil)
			}
			u.essential[j] = append(u.essential[j], id)
		}
	}
	if repo >= len(pkgs) {
		u.repo = len(u.pkgs)
	}
	u.runs = append(u.runs, int32(len(u.pkgs)))
	if len(u.runs) > 65 {
		// Too many runs to search each: a map of every name.
		u.byName = make(map[string][]int32, len(u.pkgs))
		for id, p := range u.pkgs {
			u.byName[p.Name] = append(u.byName[p.Name], int32(id))
		}
	}
	u.deps = make([][][]int32, len(u.pkgs))
	u.confl = make([][]int32, len(u.pkgs))
	u.done = make([]uint8, len(u.pkgs))
	return u
}

// Lookup returns the packages with the name, any version and architecture.
func (u *Universe) Lookup(name string) []int32 {
	if u.byName != nil {
		return u.byName[name]
	}
	if ids, ok := u.memo[name]; ok {
		return ids
	}
	if u.snap != nil {
		ids := u.present(u.snap.lookup(u.sa, name))
		ids = append(ids, u.xByName[name]...)
		u.memo[name] = ids
		return ids
	}
	var ids []int32
	for r := 0; r+1 < len(u.runs); r++ {
		lo, hi := int(u.runs[r]), int(u.runs[r+1])
		i := lo + sort.Search(hi-lo, func(k int) bool { return u.pkgs[lo+k].Name >= name })
		for ; i < hi && u.pkgs[i].Name == name; i++ {
			ids = append(ids, int32(i))
		}
	}
	u.memo[name] = ids
	return ids
}

func appendOnce(s []int32, id int32) []int32 {
	if len(s) > 0 && s[len(s)-1] == id {
		return s
	}
	return append(s, id)
}

// addRdeps records package id, p, as a reverse dependency of every name its Depends and
// Pre-Depends name (each name once).
func addRdeps(rdeps map[string][]int32, id int32, p *Package) {
	for _, field := range p.depFields() {
		for _, alts := range field {
			for _, r := range alts {
				rdeps[r.Name] = appendOnce(rdeps[r.Name], id)
			}
		}
	}
}

// Len is the number of packages.
func (u *Universe) Len() int { return len(u.pkgs) }

// Package returns package id.
func (u *Universe) Package(id int32) *Package { return u.pkg(id) }

// pkg returns package id, reading it from the snapshot the first time.
func (u *Universe) pkg(id int32) *Package {
	if p := u.pkgs[id]; p != nil {
		return p
	}
	return u.decode(id)
}

// providers returns the packages that provide name.
func (u *Universe) providers(name string) []provide {
	if u.snap == nil {
		return u.provided[name]
	}
	if pv, ok := u.provided[name]; ok {
		return pv
	}
	x := u.sa.provided
	lo, hi := u.snap.entries(x, name)
	var out []provide
	for k := lo; k < hi; k++ {
		id := x.id(k)
		if u.gone[id] {
			continue
		}
		pv := provide{pkg: id}
		if v := x.str(u.snap.blob, k, 12); v != "" {
			pv.versioned = true
			pv.ver, _ = version.Parse(v)
		}
		out = append(out, pv)
	}
	out = append(out, u.xProvided[name]...)
	u.provided[name] = out
	return out
}

// conflictersOf returns the packages whose Conflicts or Breaks name name.
func (u *Universe) conflictersOf(name string) []int32 {
	if u.snap == nil {
		return u.conflicters[name]
	}
	if ids, ok := u.conflicters[name]; ok {
		return ids
	}
	x := u.sa.conflicters
	lo, hi := u.snap.entries(x, name)
	var out []int32
	for k := lo; k < hi; k++ {
		out = append(out, x.id(k))
	}
	out = append(u.present(out), u.xConfl[name]...)
	u.conflicters[name] = out
	return out
}

// present drops from ids, in place, the snapshot's packages left out.
func (u *Universe) present(ids []int32) []int32 {
	if len(u.gone) == 0 {
		return ids
	}
	return slices.DeleteFunc(ids, func(id int32) bool { return u.gone[id] })
}

// Known reports whether a package of the universe has or provides the name.
func (u *Universe) Known(name string) bool {
	return len(u.Lookup(name)) > 0 || len(u.providers(name)) > 0
}

// Essential returns, for each name some package marks Essential: yes, the packages that
// do: every installation holds one of each.
func (u *Universe) Essential() [][]int32 { return u.essential }

// archOf is the architecture a package is installed as: its own, or the native one for
// Architecture: all.
func (u *Universe) archOf(p *Package) string {
	if p.Architecture == "all" {
		return u.Native
	}
	return p.Architecture
}

// Depends returns, for each dependency of package id (Pre-Depends, then Depends), the
// packages that meet it. A dependency that nothing in the universe meets has none;
// one met from outside (see External) is left out.
func (u *Universe) Depends(id int32) [][]int32 {
	if u.done[id]&depsDone != 0 {
		return u.deps[id]
	}
	p := u.pkg(id)
	arch := u.archOf(p)
	var out [][]int32
	for _, field := range p.depFields() {
		for _, alts := range field {
			cands, external := u.candidates(alts, arch)
			if !external {
				out = append(out, cands)
			}
		}
	}
	u.deps[id] = out
	u.done[id] |= depsDone
	return out
}

// candidates returns the packages that meet one of alts for a package installed as
// arch, in the order of the alternatives, and whether an alternative is met from
// outside the universe.
func (u *Universe) candidates(alts []relation.Relation, arch string) (out []int32, external bool) {
	for i := range alts {
		r := &alts[i]
		n := len(out)
		out = u.matchReal(out, r, arch)
		out = u.matchVirtual(out, r, arch)
		if len(out) == n && u.External != nil && !u.Known(r.Name) && u.External(r.Name) {
			return nil, true
		}
	}
	return dedup(out), false
}

// dedup drops repeated ids, keeping the first of each.
func dedup(ids []int32) []int32 {
	if len(ids) < 2 {
		return ids
	}
	out := ids[:0]
	for i, id := range ids {
		if !slices.Contains(ids[:i], id) {
			out = append(out, id)
		}
	}
	return out
}

// target is the architecture an unqualified or qualified relation of a package
// installed as arch names; "" for ":any".
func (u *Universe) target(r *relation.Relation, arch string) string {
	switch r.Arch {
	case "":
		return arch
	case "any":
		return ""
	case "native":
		return u.Native
	}
	return r.Arch
}

// matchReal appends the packages named r.Name that meet r, for a package installed as
// arch: those installed as the architecture r names (its own by default), and a
// Multi-Arch: foreign one of any architecture of the universe. "name:any" is met by a
// Multi-Arch: allowed package of any architecture, as dpkg and apt have it.
// dose-distcheck 7 lets any package of the name meet "name:any", whatever its
// Multi-Arch, and whatever version the relation asks for; DoseAny does the same, for
// the differential test to show that this is the only difference.
func (u *Universe) matchReal(out []int32, r *relation.Relation, arch string) []int32 {
	want := u.target(r, arch)
	for _, id := range u.Lookup(r.Name) {
		t := u.pkg(id)
		switch {
		case want == "" && u.DoseAny:
			out = append(out, id)
			continue
		case want == "":
			if t.MultiArch != MAAllowed {
				continue
			}
		case u.archOf(t) == want:
		case t.MultiArch == MAForeign && slices.Contains(u.archs, want):
		default:
			continue
		}
		if u.satisfies(t.parsedVersion(), r) {
			out = append(out, id)
		}
	}
	return out
}

// matchVirtual appends the packages that provide r.Name in a way that meets r: an
// unversioned relation is met by any Provides of the name, a versioned one only by a
// Provides with an "=" version that meets it. A package provides for its own
// architecture, for every one if it is Multi-Arch: foreign, and for ":any" if it is
// Multi-Arch: allowed.
func (u *Universe) matchVirtual(out []int32, r *relation.Relation, arch string) []int32 {
	want := u.target(r, arch)
	for _, pv := range u.providers(r.Name) {
		t := u.pkg(pv.pkg)
		if r.Op != relation.Any && (!pv.versioned || !u.satisfies(pv.ver, r)) {
			continue
		}
		switch {
		case want == "":
			if t.MultiArch != MAAllowed {
				continue
			}
		case t.MultiArch == MAForeign:
			if !slices.Contains(u.archs, want) {
				continue
			}
		case u.archOf(t) != want:
			continue
		}
		out = append(out, pv.pkg)
	}
	return out
}

// satisfies reports whether v meets r's version constraint.
func (u *Universe) satisfies(v version.Version, r *relation.Relation) bool {
	if r.Op == relation.Any {
		return true
	}
	want, err := version.Parse(r.Version)
	if err != nil {
		return false
	}
	return r.Op.Holds(version.Compare(v, want))
}
