package gate

import (
	"fmt"
	"slices"
	"strings"

	"github.com/armor-apt/armor/debian/relation"
)

// Explain says why package id cannot be installed, as lines for a person: the unmet
// relation and what the universe offers instead, following dependencies down to it, or
// the two packages that conflict and why each is needed. It looks for the common causes
// (a dependency nothing can meet, one forced pair in conflict); otherwise it names the
// dependencies whose every combination conflicts.
func (u *Universe) Explain(id int32) []string {
	dead := u.deadCone(id)
	if dead[id] {
		return u.explainDead(id, dead, map[int32]bool{}, 0)
	}
	if lines := u.explainForced(id, dead); lines != nil {
		return lines
	}
	p := u.pkg(id)
	var deps []string
	for _, field := range p.depFields() {
		for _, alts := range field {
			if cands, ext := u.candidates(alts, u.archOf(p)); !ext && len(cands) > 1 {
				deps = append(deps, relation.Alternatives(alts))
			}
		}
	}
	return []string{fmt.Sprintf("no choice among its alternatives (%s) avoids a conflict between the packages they need", strings.Join(deps, "; "))}
}

// deadCone returns the packages reachable from id through dependencies that cannot be
// installed even with conflicts ignored: a dependency of theirs has no candidate left.
func (u *Universe) deadCone(id int32) map[int32]bool {
	cone := []int32{id}
	in := map[int32]bool{id: true}
	for i := 0; i < len(cone); i++ {
		for _, cands := range u.Depends(cone[i]) {
			for _, c := range cands {
				if !in[c] {
					in[c] = true
					cone = append(cone, c)
				}
			}
		}
	}
	dead := map[int32]bool{}
	for changed := true; changed; {
		changed = false
		for _, p := range cone {
			if dead[p] {
				continue
			}
			for _, cands := range u.Depends(p) {
				if !slices.ContainsFunc(cands, func(c int32) bool { return !dead[c] }) {
					dead[p], changed = true, true
					break
				}
			}
		}
	}
	return dead
}

// explainDead explains a package whose dependencies cannot be met: the first dependency
// without a live candidate, and why each of its candidates is dead, to a small depth.
func (u *Universe) explainDead(id int32, dead map[int32]bool, on map[int32]bool, depth int) []string {
	p := u.pkg(id)
	on[id] = true
	defer delete(on, id)
	indent := strings.Repeat("  ", depth)
	for _, f := range []struct {
		name string
		rels [][]relation.Relation
	}{{"Pre-Depends", p.depFields()[0]}, {"Depends", p.depFields()[1]}} {
		for _, alts := range f.rels {
			cands, ext := u.candidates(alts, u.archOf(p))
			if ext || slices.ContainsFunc(cands, func(c int32) bool { return !dead[c] }) {
				continue
			}
			head := fmt.Sprintf("%s%s: %s: %s", indent, p.ID(), f.name, relation.Alternatives(alts))
			if len(cands) == 0 {
				return []string{head + ": " + u.offers(alts, u.archOf(p))}
			}
			lines := []string{head + ": every package that meets it cannot be installed:"}
			for _, c := range cands {
				if on[c] || depth >= 4 {
					lines = append(lines, fmt.Sprintf("%s  %s (its own dependencies cannot be met)", indent, u.pkg(c).ID()))
					continue
				}
				lines = append(lines, u.explainDead(c, dead, on, depth+1)...)
			}
			return lines
		}
	}
	return []string{indent + p.ID() + ": cannot be installed"}
}

// offers says what the universe has of the names alts ask for, none of which meets them.
func (u *Universe) offers(alts []relation.Relation, arch string) string {
	var parts []string
	for _, r := range alts {
		var have []string
		for _, id := range u.Lookup(r.Name) {
			have = append(have, u.pkg(id).Version+" ("+u.pkg(id).Architecture+")")
		}
		for _, pv := range u.providers(r.Name) {
			t := u.pkg(pv.pkg)
			what := "provided without a version (which meets no versioned relation) by " + t.ID()
			if pv.versioned {
				what = fmt.Sprintf("%s provided by %s", pv.ver, t.ID())
			}
			have = append(have, what)
		}
		if len(have) == 0 && u.Elsewhere != nil {
			have = u.Elsewhere(r.Name)
		}
		switch {
		case len(have) == 0:
			parts = append(parts, fmt.Sprintf("nothing has or provides %s", r.Name))
		case r.Arch == "any":
			parts = append(parts, fmt.Sprintf("%s is %s, none of them Multi-Arch: allowed and of that version", r.Name, strings.Join(have, ", ")))
		default:
			parts = append(parts, fmt.Sprintf("%s is %s, none of them for %s in that version", r.Name, strings.Join(have, ", "), u.target(&r, arch)))
		}
	}
	return strings.Join(parts, "; ")
}

// explainForced follows the dependencies id must take (those with one live candidate)
// and reports two of them that conflict, or a dependency whose every live candidate
// conflicts with one of them; nil if it finds neither.
func (u *Universe) explainForced(id int32, dead map[int32]bool) []string {
	via := map[int32]int32{id: -1} // how each forced package was reached
	forced := []int32{id}
	for i := 0; i < len(forced); i++ {
		p := forced[i]
		alts := u.depAlts(p)
		for k, cands := range u.Depends(p) {
			var live []int32
			for _, c := range cands {
				if !dead[c] && !u.conflictsAny(c, forced) {
					live = append(live, c)
				}
			}
			if len(live) == 0 {
				lines := []string{fmt.Sprintf("%s: Depends: %s: every package that meets it cannot be installed with another that %s needs:",
					u.chain(via, p), relation.Alternatives(alts[k]), u.pkg(id).ID())}
				for _, c := range cands {
					if dead[c] {
						continue
					}
					for _, q := range forced {
						if slices.Contains(u.Conflicts(c), q) {
							lines = append(lines, fmt.Sprintf("  %s conflicts with %s (needed as %s)", u.pkg(c).ID(), u.pkg(q).ID(), u.chain(via, q)))
							break
						}
					}
				}
				return lines
			}
			if len(live) == 1 {
				if _, ok := via[live[0]]; !ok {
					via[live[0]] = p
					forced = append(forced, live[0])
				}
			}
		}
	}
	return nil
}

func (u *Universe) conflictsAny(c int32, set []int32) bool {
	for _, q := range u.Conflicts(c) {
		if slices.Contains(set, q) {
			return true
		}
	}
	return false
}

// chain renders how a forced package was reached from the package explained.
func (u *Universe) chain(via map[int32]int32, p int32) string {
	var names []string
	for q := p; q >= 0; q = via[q] {
		names = append(names, u.pkg(q).ID())
	}
	slices.Reverse(names)
	return strings.Join(names, " → ")
}

// depAlts returns the relations behind Depends(id), in its order.
func (u *Universe) depAlts(id int32) [][]relation.Relation {
	p := u.pkg(id)
	var out [][]relation.Relation
	for _, field := range p.depFields() {
		for _, alts := range field {
			if _, ext := u.candidates(alts, u.archOf(p)); !ext {
				out = append(out, alts)
			}
		}
	}
	return out
}
