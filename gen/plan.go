package gen

import (
	"fmt"

	"github.com/armor-apt/armor/manifest"
)

// plan is the release a build makes, known before anything is written: its packages in
// canonical order with the inputs they come from, how they differ from the parent's, and
// what the build did so far.
type plan struct {
	pkgs  packageList
	diff  parentDiff
	stats Stats
}

// planRelease turns the inputs of groups into their packages, waits for the parent's
// manifest (ld), applies the change ch to the parent's packages and compares the release
// with them, the parent's files still being fetched meanwhile; then (the stage "apply
// change" done) it waits for the rest of the parent. It reads what it must (a .dsc the
// stat cache vouched for but the parent does not list) and writes nothing.
func planRelease(s *steps, ch change, groups []inputGroup, ins *inputSet, ld *loader) (plan, *parent, error) {
	pl, err := applyToManifest(ch, groups, ins, ld)
	if err := s.done("apply change", err); err != nil {
		return plan{}, nil, err
	}
	par, err := ld.parent()
	return pl, par, err
}

// applyToManifest is planRelease up to the parent's files.
func applyToManifest(ch change, groups []inputGroup, ins *inputSet, ld *loader) (plan, error) {
	// The inputs' packages, in canonical order, while the parent may still be loading; two
	// files claiming one package or one pool path are refused.
	inPkgs, err := resolvePackages(groups, ins)
	if err != nil {
		return plan{}, err
	}
	prev, err := ld.manifest()
	if err != nil {
		return plan{}, err
	}
	if err := completeSources(&inPkgs, prev, ins); err != nil {
		return plan{}, err
	}
	if err := checkUnmatched(ch.base, groups, prev == nil); err != nil {
		return plan{}, err
	}
	pkgs, chg, err := applyChange(ch, prev, inPkgs)
	if err != nil {
		return plan{}, err
	}
	if err := checkRemovals(ch, prev, pkgs.list); err != nil {
		return plan{}, err
	}
	diff, err := diffParent(prev, pkgs)
	if err != nil {
		return plan{}, err
	}
	stats := Stats{Inputs: len(ins.all), Read: ins.read, Added: diff.added, Removed: diff.removed, Copied: chg.copied, Pruned: chg.pruned}
	return plan{pkgs, diff, stats}, nil
}

// parentDiff is how a release's packages differ from its parent's.
type parentDiff struct {
	changed        []int // indexes in the package list of those the parent does not list as they are
	added, removed int   // packages (by identity) new or with new contents, and gone
}

// diffParent compares the package list with the parent's (nil for a first build). It
// refuses a package that would give a published pool path other bytes: clients holding
// an index of an earlier release fetch it by that path and check its hash (dak and aptly
// refuse the same).
func diffParent(prev *manifest.Manifest, pkgs packageList) (parentDiff, error) {
	var d parentDiff
	var old []manifest.Package
	if prev != nil {
		old = prev.Packages
	}
	cur := pkgs.list
	pairUp(old, cur, func(i, j int) {
		switch {
		case j < 0:
			d.removed++
		case i < 0:
			d.added++
			d.changed = append(d.changed, j)
		default:
			if old[i].SHA256 != cur[j].SHA256 {
				d.added++
			}
			if !old[i].Equal(&cur[j]) {
				d.changed = append(d.changed, j)
			}
		}
	})
	// Only packages the parent does not list as they are can break the pool path rule.
	if len(d.changed) == 0 || prev == nil {
		return d, nil
	}
	byNewPath := make(map[string]int, len(d.changed))
	for _, i := range d.changed {
		byNewPath[cur[i].Path] = i
	}
	for _, p := range prev.Packages {
		if i, ok := byNewPath[p.Path]; ok && cur[i].SHA256 != p.SHA256 {
			c := cur[i]
			from := c.Path
			if pkgs.from[i] != nil {
				from = pkgs.from[i].Path
			}
			return d, fmt.Errorf("%w: %s is %s %s (%s), already published as %s with different contents; apt clients holding the previous index would get a hash sum mismatch: give the new build a new version (for example a +b1 binNMU suffix)",
				ErrConflict, from, c.Name, c.Version, c.Architecture, p.Path)
		}
	}
	return d, nil
}
