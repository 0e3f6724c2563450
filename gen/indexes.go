package gen

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"path"
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

// writeIndexes stages every Packages index whose package list changed, in its three
// forms with their by-hash copies, and reuses the others as the tree and the parent's
// Release hold them. The writes go on in the background (tw.Go) while the next index is
// built and Release is signed.
func writeIndexes(ctx context.Context, o *Options, par *parent, pkgs []manifest.Package, ins *inputSet, icache *index.Cache, tw *tree.Writer) (indexesMade, error) {
	var out indexesMade
	members := groupIndexes(pkgs, o.Suites)
	prevMembers := groupIndexes(par.packages(), o.Suites)
	total := 0
	for _, s := range o.Suites {
		total += len(s.Components) * len(s.Architectures)
	}
	done := 0
	for _, s := range o.Suites {
		dist := "dists/" + s.Codename + "/"
		prevSums := previousReleaseSums(o.TreeDir, dist+"Release", par.files)
		si := suiteIndexes{sums: map[string]release.Digests{}}
		srcs, udebs := optionalIndexes(s.Codename, members)
		for _, comp := range s.Components {
			for _, arch := range s.Architectures {
				if err := ctx.Err(); err != nil {
					return out, err
				}
				rel := comp + "/binary-" + arch + "/Packages"
				key := indexKey{s.Codename, comp, arch}
				err := writeOptionalIndex(o, par, dist, rel, members[key], prevMembers[key], prevSums, true, icache, tw, &si, &out, func() ([][]byte, error) {
					return indexStanzas(o.TreeDir, dist+rel, members[key], prevMembers[key], ins, par)
				})
				// An index whose every member was read afresh never took its old copy.
				par.old.drop(dist + rel)
				if err != nil {
					return out, err
				}
				par.made.take(dist + rel)
				done++
				o.progress("index", done, total)
			}
			key := indexKey{s.Codename, comp, "source"}
			if err := writeSourcesIndex(o, par, s, comp, members[key], prevMembers[key], prevSums, srcs, ins, icache, tw, &si, &out); err != nil {
				return out, err
			}
			for _, arch := range s.Architectures {
				key := indexKey{s.Codename, comp + installerDir, arch}
				if err := writeInstallerIndex(o, par, s, key, members[key], prevMembers[key], prevSums, udebs, ins, icache, tw, &si, &out); err != nil {
					return out, err
				}
			}
		}
		out.suites = append(out.suites, si)
	}
	return out, nil
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

// previousReleaseSums reads the previous Release from the tree, if it is the one the
// parent lists, for the MD5 and SHA1 sums of reused indexes.
func previousReleaseSums(tree, rel string, prevFiles map[string]manifest.File) map[string]release.Digests {
	data, ok := previousFile(tree, rel, prevFiles)
	if !ok {
		return nil
	}
	f, err := release.Parse(data)
	if err != nil {
		return nil
	}
	return f.Sums
}

// variants are the forms of a Packages or Sources index that Release lists: the
// uncompressed one first, which is not published (see plain.go), then the published.
var variants = []string{"", ".gz", ".xz"}

// published are the forms of an index the tree holds and the manifest lists.
var published = variants[1:]

// reusableIndex returns the manifest entries of an index whose package list did not
// change and whose files the tree and the previous Release still vouch for. Release
// must list the uncompressed form too, whose sums the new Release repeats.
func reusableIndex(o *Options, prevFiles map[string]manifest.File, prevSums map[string]release.Digests, dist, rel string, members, old []*manifest.Package) ([]manifest.File, bool) {
	if _, ok := prevSums[rel]; !ok {
		return nil, false
	}
	return reusableFiles(o, prevFiles, prevSums, dist, rel, published, func() bool {
		return slices.EqualFunc(members, old, func(a, b *manifest.Package) bool { return a.Equal(b) })
	})
}

// reusableFiles returns the manifest entries of the file dist+rel in each of its variants
// and their by-hash copies, when unchanged says its input did not change and the tree and
// the previous Release (prevSums, by path relative to dist) still vouch for each.
func reusableFiles(o *Options, prevFiles map[string]manifest.File, prevSums map[string]release.Digests, dist, rel string, variants []string, unchanged func() bool) ([]manifest.File, bool) {
	if prevSums == nil || o.Verify || !unchanged() {
		return nil, false
	}
	p := dist + rel
	var keep []manifest.File
	for _, v := range variants {
		d, ok := prevSums[rel+v]
		f, ok2 := prevFiles[p+v]
		if !ok || !ok2 || d.SHA256 != f.SHA256 || d.Size != f.Size || !inTree(o.TreeDir, f) {
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

func byHashPath(indexPath, sum string) string {
	return path.Dir(indexPath) + "/by-hash/SHA256/" + sum
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

func sha256Hex(data []byte) string {
	s := sha256.Sum256(data)
	return hex.EncodeToString(s[:])
}
