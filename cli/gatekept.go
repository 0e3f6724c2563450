package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/armor-apt/armor/cli/config"
	"github.com/armor-apt/armor/gate"
	"github.com/armor-apt/armor/gen"
	"github.com/armor-apt/armor/internal/atomicfile"
	"github.com/armor-apt/armor/manifest"
)

// What a build keeps of a suite without a base for the next one's check, in the cache
// directory: a snapshot of the suite's packages (gate.Snapshot) and the change from it to
// the release built (gate.EncodeChange), named by the release's manifest ID. A check of a
// change to a release so kept reads neither stanzas nor the packages it does not reach,
// and writes only the change; the snapshot is written again when the change has grown
// past maxKeptChange. Both are written once the build has made its release (seal), and
// from the second build that runs with the same cache (see keepSnapshot).
//
// Whatever does not match is not trusted: a snapshot of another armor (its stamp),
// another suite or other architectures, or damaged; a change of another snapshot, or
// damaged; a release other than the parent, unless its packages are exactly the
// parent's. The check then reads the release afresh and keeps a new snapshot.

// maxKeptChange is how many packages a kept change may leave out and add, beside a
// snapshot of n, before the snapshot is written again: each build reads those it adds.
func maxKeptChange(n int) int { return max(256, n/100) }

// keptSuite is the snapshot and change a suite's last check kept.
type keptSuite struct {
	snap    *gate.Snapshot
	release string // the manifest ID of the release kept
	gone    []int
	extra   []*gate.Package
}

func (g *gateRun) keptPaths(suite string) (snapshot, change string) {
	base := filepath.Join(filepath.Dir(g.cache), "gate-"+url.PathEscape(suite))
	return base + ".snapshot", base + ".change"
}

// stamp names the armor that writes a snapshot: its version and commit, and for a
// binary built from a modified tree, the binary's size and time.
func stamp() string {
	v := currentVersion()
	s := v.Version + " " + v.Commit
	if v.Modified || v.Commit == "" {
		if exe, err := os.Executable(); err == nil {
			if fi, err := os.Stat(exe); err == nil {
				s += fmt.Sprintf(" %d %d", fi.Size(), fi.ModTime().UnixNano())
			}
		}
	}
	return s
}

// loadKept returns what the suite's last check kept, nil if nothing usable.
func (g *gateRun) loadKept(s config.Suite) *keptSuite {
	snapPath, changePath := g.keptPaths(s.Codename)
	snap, err := gate.OpenSnapshot(snapPath)
	if err != nil || snap.Stamp != g.stamp || snap.Suite != s.Codename || !slices.Equal(snap.Archs, s.Architectures) {
		return nil
	}
	data, err := os.ReadFile(changePath)
	if err != nil {
		return nil
	}
	k := &keptSuite{snap: snap}
	if k.release, k.gone, k.extra, err = gate.DecodeChange(data, snap); err != nil {
		return nil
	}
	return k
}

// suiteBinary reports whether the check reads p as a binary package of suite.
func suiteBinary(p *manifest.Package, suite string) bool {
	return p.Suite == suite && p.Architecture != "source" && !strings.HasSuffix(p.Path, ".udeb")
}

// keptCheck checks a suite without a base from what its last check kept, if that is
// the parent's packages exactly; ok is false if it is not, or does not read.
func (g *gateRun) keptCheck(ctx context.Context, s config.Suite, in *gen.GateInput, added, removed map[int]bool) (rep checkReport, ok bool, err error) {
	if in.Parent == nil {
		return checkReport{}, false, nil
	}
	k := g.loadKept(s)
	if k == nil {
		return checkReport{}, false, nil
	}
	var origin func(i int) (int, bool)
	if k.release != "" && k.release == in.Parent.ID {
		origin = k.locate(in.Parent.Packages)
	} else if o, ok := k.match(in.Parent.Packages, s.Codename); ok {
		origin = func(i int) (int, bool) { return o[i], true }
	} else {
		return checkReport{}, false, nil
	}
	ch := &gate.Change{ParentGone: k.gone, ParentExtra: k.extra}
	releaseGone := slices.Clone(k.gone)
	removedExtra := map[int]bool{}
	for _, i := range slices.Sorted(maps.Keys(removed)) {
		if !suiteBinary(&in.Parent.Packages[i], s.Codename) {
			continue
		}
		o, ok := origin(i)
		if !ok {
			return checkReport{}, false, nil
		}
		if o >= 0 {
			releaseGone = append(releaseGone, o)
			p, err := k.snap.Package(o)
			if err != nil {
				return checkReport{}, false, nil
			}
			ch.Removed = append(ch.Removed, p)
		} else {
			removedExtra[-o-1] = true
			ch.Removed = append(ch.Removed, k.extra[-o-1])
		}
	}
	slices.Sort(releaseGone)
	ch.ReleaseGone = releaseGone
	for j, p := range k.extra {
		if !removedExtra[j] {
			ch.ReleaseExtra = append(ch.ReleaseExtra, p)
		}
	}
	for i := range in.Packages {
		if !added[i] {
			continue
		}
		gp, ok, err := gatePackage(&in.Packages[i], s.Codename, in.Stanza, map[string]*gate.Package{})
		if err != nil {
			return checkReport{}, false, err
		}
		if ok {
			ch.Added = append(ch.Added, len(ch.ReleaseExtra))
			ch.ReleaseExtra = append(ch.ReleaseExtra, &gp)
		}
	}
	r, err := k.snap.Check(ctx, ch)
	if errors.Is(err, gate.ErrSnapshot) {
		return checkReport{}, false, nil
	}
	if err != nil {
		return checkReport{}, false, fmt.Errorf("suite %s: %w", s.Codename, err)
	}
	g.sealers = append(g.sealers, func(id string) { g.keepChange(s, k, id, ch.ReleaseGone, ch.ReleaseExtra) })
	out := reportOf(s, r)
	out.kept = true
	return out, true, nil
}

// locate returns, for a package of the parent (the release k keeps, by its ID), where k
// has it.
func (k *keptSuite) locate(parent []manifest.Package) func(i int) (int, bool) {
	gone := map[int]bool{}
	for _, i := range k.gone {
		gone[i] = true
	}
	return func(i int) (int, bool) {
		p := &parent[i]
		if at, ok := k.snap.Find(p.Suite+"/"+p.Component, p.Name, p.Version, p.Architecture); ok && !gone[at] && k.snap.SHA256(at) == p.SHA256 {
			return at, true
		}
		for j, e := range k.extra {
			if e.SHA256 == p.SHA256 && e.Name == p.Name && e.Version == p.Version && e.Architecture == p.Architecture {
				return -1 - j, true
			}
		}
		return 0, false
	}
}

// match returns, for each package of the parent, where the kept release has it (an
// index in the snapshot; -1-j for extra j; unused for a package the check does not
// read), if the kept release is exactly the suite's packages of the parent.
func (k *keptSuite) match(parent []manifest.Package, suite string) ([]int, bool) {
	gone := map[int]bool{}
	for _, i := range k.gone {
		gone[i] = true
	}
	extra := map[string][]int{}
	for j, p := range k.extra {
		extra[p.SHA256] = append(extra[p.SHA256], j)
	}
	origin := make([]int, len(parent))
	next, used := 0, 0
	for i := range parent {
		p := &parent[i]
		if !suiteBinary(p, suite) {
			continue
		}
		for next < k.snap.Len() && gone[next] {
			next++
		}
		switch js := extra[p.SHA256]; {
		case next < k.snap.Len() && k.snap.SHA256(next) == p.SHA256:
			origin[i] = next
			next++
		case len(js) > 0:
			origin[i] = -1 - js[0]
			extra[p.SHA256] = js[1:]
			used++
		default:
			return nil, false
		}
	}
	for next < k.snap.Len() && gone[next] {
		next++
	}
	return origin, next == k.snap.Len() && used == len(k.extra)
}

// seal keeps what the checks of this build found for the next one, now that the build
// has made its release (id, its manifest's ID); in the background, as keep does. A build
// that fails keeps nothing: what the build before kept still holds for its parent.
func (g *gateRun) seal(id string) {
	for _, f := range g.sealers {
		g.background(func() { f(id) })
	}
	g.sealers = nil
}

// keepChange keeps the release checked (id) as k's snapshot changed, or, once the change
// has grown past maxKeptChange, as a snapshot of its own.
func (g *gateRun) keepChange(s config.Suite, k *keptSuite, id string, gone []int, extra []*gate.Package) {
	snapPath, changePath := g.keptPaths(s.Codename)
	if len(gone)+len(extra) <= maxKeptChange(k.snap.Len()) {
		_ = atomicfile.WriteFileUnsynced(changePath, gate.EncodeChange(k.snap.Sum(), id, gone, extra), 0o644)
		return
	}
	pkgs := make([]*gate.Package, 0, k.snap.Len()+len(extra))
	for i, j := 0, 0; i < k.snap.Len(); i++ {
		if j < len(gone) && gone[j] == i {
			j++
			continue
		}
		p, err := k.snap.Package(i)
		if err != nil {
			return
		}
		pkgs = append(pkgs, p)
	}
	pkgs = append(pkgs, extra...)
	// In the manifest's order, as the next build matches it.
	slices.SortStableFunc(pkgs, func(a, b *gate.Package) int {
		return cmp.Or(strings.Compare(a.From, b.From), strings.Compare(a.Name, b.Name),
			strings.Compare(a.Version, b.Version), strings.Compare(a.Architecture, b.Architecture))
	})
	g.writeSnapshot(s, id, pkgs, snapPath, changePath)
}

// keepSnapshot keeps the suite's packages (all of them, in the manifest's order) as a
// snapshot with no change, once the build is sealed; unless nothing was built here
// before: a fresh runner, most likely, whose cache is thrown away with it, spared the
// snapshot's cost. It only notes the build, so that a runner that keeps its cache has a
// snapshot from its second build on.
func (g *gateRun) keepSnapshot(s config.Suite, pkgs []gate.Package) {
	snapPath, changePath := g.keptPaths(s.Codename)
	marker := strings.TrimSuffix(changePath, ".change") + ".built"
	if !exists(changePath) && !exists(marker) {
		g.sealers = append(g.sealers, func(id string) { _ = atomicfile.WriteFileUnsynced(marker, []byte(id+"\n"), 0o644) })
		return
	}
	ptrs := make([]*gate.Package, len(pkgs))
	for i := range pkgs {
		ptrs[i] = &pkgs[i]
	}
	g.sealers = append(g.sealers, func(id string) { g.writeSnapshot(s, id, ptrs, snapPath, changePath) })
}

// writeSnapshot writes a snapshot of release id, then an empty change of it: a change
// left by the snapshot before names that one, and is refused until it is replaced.
func (g *gateRun) writeSnapshot(s config.Suite, id string, pkgs []*gate.Package, snapPath, changePath string) {
	data := gate.EncodeSnapshot(g.stamp, s.Codename, s.Architectures, pkgs)
	snap, err := gate.DecodeSnapshot(data)
	if err != nil {
		return
	}
	if atomicfile.WriteFileUnsynced(snapPath, data, 0o644) != nil {
		return
	}
	_ = atomicfile.WriteFileUnsynced(changePath, gate.EncodeChange(snap.Sum(), id, nil, nil), 0o644)
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// reportOf is what the build prints of a suite's report.
func reportOf(s config.Suite, rep *gate.Report) checkReport {
	out := checkReport{Suite: s.Codename, Policy: s.CheckPolicy(), Checked: rep.Checked, External: rep.External, Broken: []checkFinding{}, report: rep}
	for _, f := range rep.Broken {
		out.Broken = append(out.Broken, checkFinding{
			Package: f.Package.Name, Version: f.Package.Version, Architecture: f.Package.Architecture,
			In: f.Package.From, On: f.Architecture, Existing: f.Existing, Reasons: f.Reasons,
		})
	}
	return out
}
