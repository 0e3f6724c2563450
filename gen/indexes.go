package gen

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/armor-apt/armor/debian/deb"
	"github.com/armor-apt/armor/debian/release"
	"github.com/armor-apt/armor/gen/index"
	"github.com/armor-apt/armor/gen/tree"
	"github.com/armor-apt/armor/manifest"
)

// indexesMade is what writeIndexes made.
type indexesMade struct {
	suites  []suiteIndexes  // one per Options.Suites, in its order
	files   []manifest.File // every index and its by-hash copy, reused or new, unsorted
	written int             // indexes regenerated
	// contentsWritten counts the Contents files regenerated, which writeAllIndexes merged.
	contentsWritten int
	// plains are the uncompressed forms of the indexes regenerated, which the build cache
	// keeps once the release is committed (keepPlains).
	plains []plainIndex
}

// plainIndex is an uncompressed index and its SHA-256.
type plainIndex struct {
	path, sum string // in the tree; the SHA-256 of data
	data      []byte
}

// newIndexesMade returns an indexesMade for n suites, none of whose indexes is known yet.
func newIndexesMade(n int) indexesMade {
	out := indexesMade{suites: make([]suiteIndexes, n)}
	for i := range out.suites {
		out.suites[i].sums = map[string]release.Digests{}
	}
	return out
}

// merge adds to m the files and Release sums of other, made for the same suites.
func (m *indexesMade) merge(other indexesMade) {
	for i, s := range other.suites {
		maps.Copy(m.suites[i].sums, s.sums)
		m.suites[i].changed = m.suites[i].changed || s.changed
	}
	m.files = append(m.files, other.files...)
	m.plains = append(m.plains, other.plains...)
}

// suiteIndexes is what a suite's Release lists of its indexes.
type suiteIndexes struct {
	sums    map[string]release.Digests // by path relative to dists/<codename>/
	changed bool                       // an index was regenerated
}

// indexSpec is what the writers of indexes and Contents files need of the options.
type indexSpec struct {
	dirs     dirs
	suites   []Suite
	verify   bool      // reuse nothing of the parent: regenerate every index
	fetch    fetchFunc // reads a package from the store, for its file list; may be nil
	progress func(done, total int)
}

func (o *Options) indexSpec() indexSpec {
	return indexSpec{o.dirs(), o.Suites, o.Verify, o.Fetch, o.progressOf("index")}
}

// indexWriter writes the Packages and Sources indexes of a build: what writing any of them
// needs, and what was made so far (out).
type indexWriter struct {
	tree        string
	verify      bool
	par         *parent
	ins         *inputSet
	icache      *index.Cache
	tw          *tree.Writer
	members     map[indexKey][]*manifest.Package // the release's, by index
	prevMembers map[indexKey][]*manifest.Package // the parent's
	out         indexesMade
}

// writeIndexes stages every Packages index whose package list changed, in its three
// forms with their by-hash copies, and reuses the others as the tree and the parent's
// Release hold them. The writes go on in the background (tw.Go) while the next index is
// built and Release is signed.
func writeIndexes(ctx context.Context, sp indexSpec, par *parent, pkgs []manifest.Package, ins *inputSet, icache *index.Cache, tw *tree.Writer) (indexesMade, error) {
	w := &indexWriter{tree: sp.dirs.tree, verify: sp.verify, par: par, ins: ins, icache: icache, tw: tw,
		members: groupIndexes(pkgs, sp.suites), prevMembers: groupIndexes(par.packages(), sp.suites)}
	total, done := 0, 0
	for _, s := range sp.suites {
		total += len(s.Components) * len(s.Architectures)
	}
	for _, s := range sp.suites {
		si, err := w.suite(ctx, s, func() {
			if done++; sp.progress != nil {
				sp.progress(done, total)
			}
		})
		if err != nil {
			return w.out, err
		}
		w.out.suites = append(w.out.suites, si)
	}
	return w.out, nil
}

// suite writes or reuses every index of the suite s, calling indexed after each
// binary-<arch>/Packages, and returns what its Release lists of them.
func (w *indexWriter) suite(ctx context.Context, s Suite, indexed func()) (suiteIndexes, error) {
	dist := "dists/" + s.Codename + "/"
	prevSums := previousReleaseSums(w.tree, dist+"Release", w.par.files)
	si := suiteIndexes{sums: map[string]release.Digests{}}
	srcs, udebs := optionalIndexes(s.Codename, w.members)
	for _, comp := range s.Components {
		for _, arch := range s.Architectures {
			if err := ctx.Err(); err != nil {
				return si, err
			}
			rel := comp + "/binary-" + arch + "/Packages"
			key := indexKey{s.Codename, comp, arch}
			err := w.write(dist, rel, key, prevSums, true, &si, func() ([][]byte, error) {
				return indexStanzas(w.tree, dist+rel, w.members[key], w.prevMembers[key], w.ins, w.par)
			})
			// An index whose every member was read afresh never took its old copy.
			w.par.old.drop(dist + rel)
			if err != nil {
				return si, err
			}
			w.par.made.take(dist + rel)
			w.par.takeLoaded(dist + rel)
			indexed()
		}
		if err := w.sources(s, comp, prevSums, srcs, &si); err != nil {
			return si, err
		}
		for _, arch := range s.Architectures {
			if err := w.installer(s, indexKey{s.Codename, comp + installerDir, arch}, prevSums, udebs, &si); err != nil {
				return si, err
			}
		}
	}
	return si, nil
}

// write stages the index dist+rel, whose members key names, when want is set or the
// parent had it (once published, an index stays, if empty, so no client meets a 404),
// reusing the parent's when its package list did not change, and adds what it made to si
// and w.out. stanzasOf returns the stanzas of a new index.
func (w *indexWriter) write(dist, rel string, key indexKey, prevSums map[string]release.Digests, want bool, si *suiteIndexes, stanzasOf func() ([][]byte, error)) error {
	if !want && !w.par.hadIndex(dist+rel) {
		return nil
	}
	if kept, ok := reusableIndex(w.tree, w.verify, w.par.files, prevSums, dist, rel, w.members[key], w.prevMembers[key]); ok {
		for _, v := range variants {
			si.sums[rel+v] = prevSums[rel+v]
		}
		w.out.files = append(w.out.files, kept...)
		return nil
	}
	stanzas, err := stanzasOf()
	var digests [3]release.Digests
	if err == nil {
		digests, err = writeIndex(w.tw, w.icache, w.par, dist+rel, stanzas, &w.out)
	}
	if err != nil {
		return fmt.Errorf("index %s%s: %w", dist, rel, err)
	}
	for i, d := range digests {
		si.sums[rel+variants[i]] = d
		if variants[i] == "" {
			continue // not published
		}
		w.out.files = append(w.out.files,
			manifest.File{Path: dist + rel + variants[i], Size: d.Size, SHA256: d.SHA256},
			manifest.File{Path: byHashPath(dist+rel, d.SHA256), Size: d.Size, SHA256: d.SHA256})
	}
	si.changed = true
	w.out.written++
	return nil
}

// indexKey names one binary-<arch>/Packages index; arch "source" names the Sources
// index, and component "<component>/debian-installer" the index of installer packages.
type indexKey struct{ suite, component, arch string }

// groupIndexes sorts packages (in canonical order) into the indexes that list them: its
// own architecture's, or every architecture of its suite for Architecture: all. Order
// within an index is the canonical order.
func groupIndexes(pkgs []manifest.Package, suites []Suite) map[indexKey][]*manifest.Package {
	archs := make(map[string][]string, len(suites))
	for _, s := range suites {
		archs[s.Codename] = s.Architectures
	}
	var g grouper[indexKey]
	for i := range pkgs {
		p := &pkgs[i]
		comp := p.Component
		if isInstaller(p.Path) {
			comp += installerDir
		}
		if p.Architecture != "all" {
			g.add(indexKey{p.Suite, comp, p.Architecture}, p)
			continue
		}
		for _, a := range archs[p.Suite] {
			g.add(indexKey{p.Suite, comp, a}, p)
		}
	}
	return g.groups()
}

// grouper sorts packages into lists by key. Packages in canonical order come in long
// runs of a few keys (suite by suite, component by component, their architectures
// interleaved), so it looks among the keys it used last before it hashes one: grouping
// 100,000 packages spent most of its time hashing map keys.
type grouper[K comparable] struct {
	lists  map[K]*[]*manifest.Package
	recent [4]struct {
		key  K
		list *[]*manifest.Package
	}
	next int // the entry of recent to replace next
}

func (g *grouper[K]) add(k K, p *manifest.Package) {
	for i := range g.recent {
		if r := &g.recent[i]; r.list != nil && r.key == k {
			*r.list = append(*r.list, p)
			return
		}
	}
	if g.lists == nil {
		g.lists = map[K]*[]*manifest.Package{}
	}
	l := g.lists[k]
	if l == nil {
		l = new([]*manifest.Package)
		g.lists[k] = l
	}
	*l = append(*l, p)
	g.recent[g.next].key, g.recent[g.next].list = k, l
	g.next = (g.next + 1) % len(g.recent)
}

// groups returns the lists by key.
func (g *grouper[K]) groups() map[K][]*manifest.Package {
	out := make(map[K][]*manifest.Package, len(g.lists))
	for k, l := range g.lists {
		out[k] = *l
	}
	return out
}

// variants are the forms of a Packages or Sources index that Release lists: the
// uncompressed one first, which is not published (see plain.go), then the published.
var variants = []string{"", ".gz", ".xz"}

// published are the forms of an index the tree holds and the manifest lists.
var published = variants[1:]

// reusableIndex returns the manifest entries of an index whose package list did not
// change and whose files the tree and the previous Release still vouch for. Release
// must list the uncompressed form too, whose sums the new Release repeats.
func reusableIndex(tree string, verify bool, prevFiles map[string]manifest.File, prevSums map[string]release.Digests, dist, rel string, members, old []*manifest.Package) ([]manifest.File, bool) {
	if _, ok := prevSums[rel]; !ok {
		return nil, false
	}
	return reusableFiles(tree, verify, prevFiles, prevSums, dist, rel, published, func() bool {
		return slices.EqualFunc(members, old, func(a, b *manifest.Package) bool { return a.Equal(b) })
	})
}

// reusableFiles returns the manifest entries of the file dist+rel in each of its variants
// and their by-hash copies, when unchanged says its input did not change and the tree and
// the previous Release (prevSums, by path relative to dist) still vouch for each. A build
// that verifies (--verify) reuses nothing.
func reusableFiles(tree string, verify bool, prevFiles map[string]manifest.File, prevSums map[string]release.Digests, dist, rel string, variants []string, unchanged func() bool) ([]manifest.File, bool) {
	if prevSums == nil || verify || !unchanged() {
		return nil, false
	}
	p := dist + rel
	var keep []manifest.File
	for _, v := range variants {
		d, ok := prevSums[rel+v]
		f, ok2 := prevFiles[p+v]
		if !ok || !ok2 || d.SHA256 != f.SHA256 || d.Size != f.Size || !inTree(tree, f) {
			return nil, false
		}
		bh, ok := prevFiles[byHashPath(p, f.SHA256)]
		if !ok {
			return nil, false
		}
		keep = append(keep, f, bh)
	}
	return keep, true
}

// writeIndex assembles the Packages or Sources index at indexPath (relative to the tree)
// from its stanzas and stages its published forms, each with its by-hash copy, in the
// background. It returns the digests of the three forms, in the order of variants, and
// adds the uncompressed one to out.plains. An index spliced from the parent's (see
// indexStanzas) is built on it.
func writeIndex(tw *tree.Writer, icache *index.Cache, par *parent, indexPath string, stanzas [][]byte, out *indexesMade) ([3]release.Digests, error) {
	var files *index.Files
	var err error
	if base, ok := par.base(indexPath); ok {
		files, err = index.BuildOn(stanzas, icache, indexPath, base)
	} else {
		files, err = index.Build(stanzas, icache, indexPath)
	}
	if err != nil {
		return files.Digests, err
	}
	out.plains = append(out.plains, plainIndex{indexPath, files.Digests[0].SHA256, files.Plain})
	for i, data := range [][]byte{files.Gzip, files.Xz} {
		p := indexPath + published[i]
		bh := byHashPath(indexPath, files.Digests[i+1].SHA256)
		// The writes go on while the next index is built and Release is signed.
		tw.Go(func() error {
			if err := tw.WriteFile(p, data, bh); err != nil {
				return fmt.Errorf("index %s: %w", p, err)
			}
			return nil
		})
	}
	return files.Digests, nil
}

// indexStanzas returns the Packages stanzas of an index's members: fresh from the .deb
// for files read in this build, reused from the index in the tree for the others, and
// read again from the .deb when the tree does not have them. old lists the index's
// members in the parent, the order the tree's index lists their stanzas in; pf holds the
// tree's indexes read ahead.
func indexStanzas(tree, indexPath string, members, old []*manifest.Package, ins *inputSet, par *parent) ([][]byte, error) {
	var prev *oldIndex
	src := -1 // the number of the stanza in prev that stanza returned, or -1
	stanza := func(p *manifest.Package) ([]byte, error) {
		src = -1
		if in := ins.fresh[p.SHA256]; in != nil && in.Pkg != nil {
			return in.Pkg.Stanza(p.Path), nil
		}
		if prev == nil {
			prev = readOldIndex(par, indexPath, old)
		}
		if i := prev.locate(p); i >= 0 {
			src = i
			return prev.stanzas[i], nil
		}
		// A package copied from another suite or component, or moved between
		// architectures' indexes: the parent lists its stanza in another index.
		if st := par.stanzaElsewhere(p); st != nil {
			return st, nil
		}
		in := ins.forSum(p.SHA256)
		if in == nil {
			return nil, fmt.Errorf("no stanza for %s %s (%s): it is not among the inputs, and the parent's indexes in the tree do not list it", p.Name, p.Version, p.Architecture)
		}
		pkg, err := deb.ReadFile(in.Path)
		if err != nil {
			return nil, err
		}
		in.Pkg = pkg
		return pkg.Stanza(p.Path), nil
	}
	out := make([][]byte, 0, len(members))
	from := make([]int, 0, len(members)) // see oldIndex.splice
	for _, p := range members {
		st, err := stanza(p)
		if err != nil {
			return nil, err
		}
		ph := st
		if src < 0 || !prev.phasedAs(src) {
			ph = withPhase(st, p.Phased)
		}
		if len(ph) != len(st) || len(st) == 0 || &ph[0] != &st[0] {
			src = -1 // changed: no longer the old stanza
		}
		out = append(out, ph)
		from = append(from, src)
	}
	if prev != nil {
		var base index.Base
		var ok bool
		if out, base, ok = prev.splice(out, from); ok && base.SHA256 != "" {
			par.noteBase(indexPath, base)
		}
	}
	return out, nil
}
