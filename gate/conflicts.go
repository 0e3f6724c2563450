package gate

import (
	"slices"

	"github.com/armor-apt/armor/debian/relation"
)

// Conflicts returns every package that package id cannot be installed with: those its
// Conflicts and Breaks name, those whose Conflicts and Breaks name it, and the other
// packages of its name (one version of a package at a time, and one architecture unless
// it is Multi-Arch: same, whose architectures must then have one version).
func (u *Universe) Conflicts(id int32) []int32 {
	if u.done[id]&conflDone != 0 {
		return u.confl[id]
	}
	p := u.pkg(id)
	out := slices.Clone(u.own(id))
	check := func(q int32) {
		if q != id && !slices.Contains(out, q) && slices.Contains(u.own(q), id) {
			out = append(out, q)
		}
	}
	for _, q := range u.Lookup(p.Name) {
		check(q)
	}
	for _, q := range u.conflictersOf(p.Name) {
		check(q)
	}
	for _, pr := range p.Provides {
		for _, q := range u.conflictersOf(pr.Name) {
			check(q)
		}
	}
	u.confl[id] = out
	u.done[id] |= conflDone
	return out
}

// own returns the packages id's own fields and name rule it out with, without those
// that rule it out in theirs; kept in ownConfl.
func (u *Universe) own(id int32) []int32 {
	if u.ownDone == nil {
		u.ownDone = make([]bool, len(u.pkgs))
		u.ownConfl = make([][]int32, len(u.pkgs))
	}
	if u.ownDone[id] {
		return u.ownConfl[id]
	}
	p := u.pkg(id)
	var out []int32
	out = u.sameName(out, id)
	for _, field := range [][]relation.Relation{p.Breaks, p.Conflicts} {
		for i := range field {
			c := &field[i]
			if p.MultiArch == MASame && selfConflict(p, c) {
				out = u.selfVirtual(out, p, c)
				continue
			}
			if p.MultiArch == MASame && c.Op != relation.Any && len(u.Lookup(c.Name)) == 0 {
				continue // dose drops a versioned conflict on a name no package has
			}
			for _, a := range u.archs {
				out = u.matchReal(out, c, a)
				if len(u.providers(c.Name)) > 0 {
					out = u.matchVirtual(out, c, a)
				}
			}
		}
	}
	out = slices.DeleteFunc(dedup(out), func(q int32) bool { return q == id })
	u.ownConfl[id], u.ownDone[id] = out, true
	return out
}

// sameName appends the other packages of id's name that cannot be installed beside it:
// all of them, unless id is Multi-Arch: same, whose other architectures must have its
// version (and whose Multi-Arch: foreign namesakes of other architectures stand in for
// its own, as dose-distcheck reads them).
func (u *Universe) sameName(out []int32, id int32) []int32 {
	p := u.pkg(id)
	arch := u.archOf(p)
	for _, q := range u.Lookup(p.Name) {
		if q == id {
			continue
		}
		t := u.pkg(q)
		switch {
		case p.MultiArch != MASame:
			out = append(out, q)
		case u.archOf(t) == arch:
			out = append(out, q) // another version of the same architecture
		case t.MultiArch == MAForeign:
			out = append(out, q)
		case t.Version != p.Version:
			out = append(out, q) // Multi-Arch: same, but another version
		}
	}
	return out
}

// selfConflict reports whether a Conflicts or Breaks of a Multi-Arch: same package names
// the package itself: its own name, or unversioned a name it provides.
func selfConflict(p *Package, c *relation.Relation) bool {
	if c.Name == p.Name {
		return true
	}
	return c.Op == relation.Any && slices.ContainsFunc(p.Provides, func(r relation.Relation) bool { return r.Name == c.Name })
}

// selfVirtual appends what a Multi-Arch: same package's conflict on its own name or a
// name it provides rules out, as dose-distcheck reads it: every package, of any version,
// whose name is that name or one of its providers', other than the package's own name
// (so that its instances of other architectures stay co-installable).
func (u *Universe) selfVirtual(out []int32, p *Package, c *relation.Relation) []int32 {
	names := []string{}
	if len(u.Lookup(c.Name)) > 0 {
		names = append(names, c.Name)
	}
	for _, pv := range u.providers(c.Name) {
		names = append(names, u.pkg(pv.pkg).Name)
	}
	for _, n := range names {
		if n == p.Name {
			continue
		}
		for _, q := range u.Lookup(n) {
			t := u.pkg(q)
			if c.Arch != "" && c.Arch != "any" && u.archOf(t) != u.target(c, u.archOf(p)) && t.MultiArch != MAForeign {
				continue
			}
			out = append(out, q)
		}
	}
	return out
}
