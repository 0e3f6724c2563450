package controld

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/armor-apt/armor/debian/deb"
	"github.com/armor-apt/armor/debian/release"
	"github.com/armor-apt/armor/manifest"
)

// The signature bounds what is served (invariant 9). A verified InRelease lists, by
// size and SHA-256, every file of its suite that apt reads; the Packages and Sources
// indexes among them list every pool file apt downloads, by path, size and SHA-256. A
// release is recorded only if its manifest serves exactly that: every dists/ path is a
// suite's InRelease, Release or Release.gpg or a file its Release lists (a by-hash path
// only under a hash the Release lists in that directory), and the packages of the
// manifest are exactly the stanzas of the indexes, field for field (name, version,
// architecture, path, size, SHA-256, phasing, a source package's files). Whoever can
// write to the store and holds a push token, but not the key, cannot make an edge serve
// a byte the key did not sign.
//
// The cost follows the change. Each index is reduced to the digests of its stanzas (a
// digest of what the stanza says of one package), which are kept in memory by the
// index's SHA-256 (indexCache): an index unchanged since a release this controld
// verified is not read again, and a changed Packages.gz is read only where its gzip
// members changed (see indexcache.go). The packages are held to those digests through
// the parent release, when this controld verified it and keeps it (verified.go): a
// package equal to the parent's at the same place of the index, counted from either
// end, has the digest the parent's had, so only the packages between the common start
// and end of each index are digested (followsParent). Without a kept parent (the first
// release after a restart, a parent verified elsewhere), or where that proof fails,
// every package is reduced to its digest and the lists are compared in order, then as
// multisets; a difference is explained from a full read of the index.

// suite is one verified dists/<suite> directory.
type suite struct {
	dir  string // "dists/stable"
	name string // the suite's packages' Suite in the manifest: Release's Codename, else dir less "dists/"
	rel  *release.File
	date time.Time // the signed Release's Date
}

// label is how messages name the suite.
func (s *suite) label() string { return strings.TrimPrefix(s.dir, "dists/") }

// entryDigest is what an index must say of one package, hashed.
type entryDigest [16]byte

// index is one Packages or Sources index a suite's Release lists.
type index struct {
	suite *suite
	rel   string // relative to the suite's directory, uncompressed: "main/binary-amd64/Packages"
	kind  deb.IndexKind
	comp  string // "main"; "main/debian-installer" for installer packages
	arch  string // "amd64"; "source" for a Sources index
	// plain is what Release lists of the uncompressed form (ok false when it lists none).
	plain   release.Digests
	plainOK bool
	forms   []manifest.File // the forms the manifest serves, in the order they are read
	members []int32         // the manifest's packages it must list, in manifest order
}

// label names the index in messages.
func (ix *index) label() string {
	return "suite " + ix.suite.label() + ", index " + ix.rel
}

// compressions are the extensions of an index's forms apt knows, in the order controld
// prefers to read them: gzip first, whose members it can read one by one.
var compressions = []string{".gz", "", ".xz", ".zst", ".bz2", ".lzma"}

// uncompressed returns the path of the uncompressed form of an index path.
func uncompressed(p string) string {
	for _, ext := range compressions {
		if ext != "" && strings.HasSuffix(p, ext) {
			return strings.TrimSuffix(p, ext)
		}
	}
	return p
}

// indexKind reads what index a path of a Release names, from its uncompressed path.
func indexKind(rel string) (kind deb.IndexKind, comp, arch string, ok bool) {
	if c, found := strings.CutSuffix(rel, "/source/Sources"); found {
		return deb.SourcesIndex, c, "source", true
	}
	dir, found := strings.CutSuffix(rel, "/Packages")
	if !found {
		return 0, "", "", false
	}
	a, found := strings.CutPrefix(path.Base(dir), "binary-")
	if !found || a == "" {
		return 0, "", "", false
	}
	return deb.PackagesIndex, path.Dir(dir), a, true
}

// findIndexes returns the Packages and Sources indexes each suite's Release lists, with
// the forms of each that the manifest serves.
func findIndexes(suites []*suite, paths map[string]manifest.Object) ([]*index, error) {
	var out []*index
	for _, s := range suites {
		seen := map[string]bool{}
		for _, p := range s.rel.Paths() {
			base := uncompressed(p)
			kind, comp, arch, ok := indexKind(base)
			if !ok || seen[base] {
				continue
			}
			seen[base] = true
			ix := &index{suite: s, rel: base, kind: kind, comp: comp, arch: arch}
			ix.plain, ix.plainOK = s.rel.Sums[base]
			for _, ext := range compressions {
				d, listed := s.rel.Sums[base+ext]
				if !listed {
					continue
				}
				if d.SHA256 == "" {
					return nil, invalidRelease("%s: Release lists %s without a SHA256 sum: the packages it lists cannot be held to it",
						ix.label(), base+ext)
				}
				full := s.dir + "/" + base + ext
				if o, served := paths[full]; served {
					ix.forms = append(ix.forms, manifest.File{Path: full, Size: o.Size, SHA256: o.SHA256})
				}
			}
			if len(ix.forms) == 0 {
				return nil, invalidRelease("%s: the signed Release lists it, but the manifest serves none of its forms: apt could not read it; publish the tree armor build wrote", ix.label())
			}
			out = append(out, ix)
		}
	}
	return out, nil
}

// assignPackages sets the members of each index: the manifest's packages it must list. A
// package no index of its suite and component could list is refused.
func assignPackages(m *manifest.Manifest, suites []*suite, indexes []*index) error {
	type compKey struct {
		suite, comp string
		kind        deb.IndexKind
	}
	byComp := map[compKey][]*index{}
	for _, ix := range indexes {
		k := compKey{ix.suite.name, ix.comp, ix.kind}
		byComp[k] = append(byComp[k], ix)
	}
	// Two passes: count each index's members, then fill them, each list allocated once.
	counts := map[*index]int{}
	var last compKey
	var list []*index
	for pass := range 2 {
		for i := range m.Packages {
			p := &m.Packages[i]
			k := compKey{p.Suite, p.Component, deb.PackagesIndex}
			if p.Architecture == "source" {
				k.kind = deb.SourcesIndex
			} else if strings.HasSuffix(p.Path, ".udeb") {
				k.comp += "/debian-installer"
			}
			if i == 0 || k != last {
				last, list = k, byComp[k]
			}
			matched := false
			for _, ix := range list {
				if ix.kind == deb.SourcesIndex || p.Architecture == "all" || ix.arch == p.Architecture {
					if pass == 0 {
						counts[ix]++
					} else {
						ix.members = append(ix.members, int32(i))
					}
					matched = true
				}
			}
			if !matched {
				return invalidRelease("package %s: %s", describe(p), noIndexFor(p, k.comp, suites))
			}
		}
		if pass == 0 {
			for ix, n := range counts {
				ix.members = make([]int32, 0, n)
			}
		}
	}
	return nil
}

// noIndexFor says why no signed index could list p.
func noIndexFor(p *manifest.Package, comp string, suites []*suite) string {
	var dirs []string
	for _, s := range suites {
		if s.name == p.Suite {
			dirs = append(dirs, s.label())
		}
	}
	if len(dirs) == 0 {
		return fmt.Sprintf("the manifest has no signed InRelease of suite %s: no signed index lists it", p.Suite)
	}
	what := "binary-" + p.Architecture + "/Packages"
	if p.Architecture == "source" {
		what = "source/Sources"
	}
	return fmt.Sprintf("no index the signed Release of suite %s lists would list it (%s/%s): no signed index lists it",
		strings.Join(dirs, ", "), comp, what)
}

// describe names a package of the manifest in messages.
func describe(p *manifest.Package) string {
	return fmt.Sprintf("%s %s (%s) in %s/%s at %s", p.Name, p.Version, p.Architecture, p.Suite, p.Component, p.Path)
}

// digestPackages returns each package's digest (see entryDigestOf), computed on all cores.
func digestPackages(m *manifest.Manifest) []entryDigest {
	out := make([]entryDigest, len(m.Packages))
	parts := max(1, min(runtimeCPUs(), len(m.Packages)/4096))
	var wg sync.WaitGroup
	for w := range parts {
		wg.Go(func() {
			var buf []byte
			for i := w * len(out) / parts; i < (w+1)*len(out)/parts; i++ {
				p := &m.Packages[i]
				out[i], buf = entryDigestOf(buf, p.Name, p.Version, p.Architecture, p.Path, p.Size, p.SHA256, p.Phased, p.Files)
			}
		})
	}
	wg.Wait()
	return out
}

// digestOfEntry is the digest of a stanza, comparable with a package's.
func digestOfEntry(buf []byte, e *deb.IndexEntry) (entryDigest, []byte) {
	return entryDigestOf(buf, e.Name, e.Version, e.Architecture, e.Path, e.Size, e.SHA256, e.Phased, e.Files)
}

// entryDigestOf hashes what an index says of a package: an unambiguous encoding of its
// fields (each length-prefixed), its further files sorted by path. It is a SHA-256
// truncated to 128 bits: a manifest entry that is not what the signed index says would
// need a second preimage. buf is scratch space, returned for reuse.
func entryDigestOf(buf []byte, name, version, arch, p string, size int64, sum, phased string, files []manifest.File) (entryDigest, []byte) {
	buf = buf[:0]
	str := func(s string) {
		buf = binary.AppendUvarint(buf, uint64(len(s)))
		buf = append(buf, s...)
	}
	for _, s := range []string{name, version, arch, p, strconv.FormatInt(size, 10), sum, phased} {
		str(s)
	}
	if len(files) > 0 {
		sorted := slices.Clone(files)
		slices.SortFunc(sorted, func(a, b manifest.File) int { return strings.Compare(a.Path, b.Path) })
		buf = binary.AppendUvarint(buf, uint64(len(sorted)))
		for _, f := range sorted {
			str(f.Path)
			str(strconv.FormatInt(f.Size, 10))
			str(f.SHA256)
		}
	}
	sum256 := sha256.Sum256(buf)
	return entryDigest(sum256[:16]), buf
}

// boundPackages checks that the packages of m are exactly what the indexes of the
// verified suites list. An index is first held to the packages of m's parent, when this
// controld verified the parent and still keeps it (followsParent); any index that proof
// does not cover is compared with the digests of all of m's packages, and a difference
// is explained. A release that passes is kept for its own children.
func (s *Server) boundPackages(ctx context.Context, repo string, m *manifest.Manifest, suites []*suite, paths map[string]manifest.Object) error {
	indexes, err := findIndexes(suites, paths)
	if err != nil {
		return err
	}
	if err := assignPackages(m, suites, indexes); err != nil {
		return err
	}
	parent := s.verified.get(repo, m.Parent)
	digests := sync.OnceValue(func() []entryDigest { return digestPackages(m) })
	kept := make([]*keptIndex, len(indexes))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(runtimeCPUs())
	for n, ix := range indexes {
		g.Go(func() error {
			got, err := s.indexes.digests(gctx, s, repo, ix)
			if err != nil {
				return err
			}
			if parent != nil && followsParent(got, ix, m.Packages, parent) {
				s.verified.follows.Add(1)
				kept[n] = &keptIndex{members: ix.members, digests: got}
				return nil
			}
			same, inOrder := sameEntries(got, ix.members, digests())
			if inOrder {
				kept[n] = &keptIndex{members: ix.members, digests: got}
			}
			if same {
				return nil
			}
			return s.explainIndex(gctx, ix, m)
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	r := &verifiedRelease{repo: repo, id: m.ID, packages: m.Packages, indexes: make(map[string]keptIndex, len(indexes))}
	for n, ix := range indexes {
		if kept[n] != nil {
			r.indexes[ix.key()] = *kept[n]
		}
	}
	s.verified.add(r)
	return nil
}

// followsParent reports whether the stanza digests of an index, got, are proven to be
// those of its members (packages of the release being checked) through parent, a
// release this controld verified: where got holds the digest the parent's index held at
// the same place, counted from its start or from its end, and the member is equal field
// for field to the parent's package there, the member's digest is that digest. Only the
// members between the common start and the common end are digested: for a release that
// adds one package, a few, whatever the size of the index. False means not proven (the
// caller then compares every package); it never means refused.
func followsParent(got []entryDigest, ix *index, pkgs []manifest.Package, parent *verifiedRelease) bool {
	pk, ok := parent.indexes[ix.key()]
	if !ok || len(got) != len(ix.members) {
		return false
	}
	same := func(i, j int) bool { // the member at i, the parent's stanza at j
		return got[i] == pk.digests[j] && pkgs[ix.members[i]].Equal(&parent.packages[pk.members[j]])
	}
	n, pn := len(got), len(pk.digests)
	head := 0
	for head < n && head < pn && same(head, head) {
		head++
	}
	tail := 0
	for tail < n-head && tail < pn-head && same(n-1-tail, pn-1-tail) {
		tail++
	}
	var buf []byte
	for i := head; i < n-tail; i++ {
		p := &pkgs[ix.members[i]]
		var d entryDigest
		d, buf = entryDigestOf(buf, p.Name, p.Version, p.Architecture, p.Path, p.Size, p.SHA256, p.Phased, p.Files)
		if d != got[i] {
			return false
		}
	}
	return true
}

// sameEntries reports whether an index's stanza digests are the members' digests: in
// order (as armor writes indexes) or, failing that, as multisets; inOrder says which.
func sameEntries(got []entryDigest, members []int32, digests []entryDigest) (same, inOrder bool) {
	if len(got) != len(members) {
		return false, false
	}
	inOrder = true
	for i, m := range members {
		if got[i] != digests[m] {
			inOrder = false
			break
		}
	}
	if inOrder {
		return true, true
	}
	want := make([]entryDigest, len(members))
	for i, m := range members {
		want[i] = digests[m]
	}
	a := slices.Clone(got)
	cmp := func(x, y entryDigest) int { return strings.Compare(string(x[:]), string(y[:])) }
	slices.SortFunc(a, cmp)
	slices.SortFunc(want, cmp)
	return slices.Equal(a, want), false
}

// maxProblems bounds how many differences a refusal names.
const maxProblems = 10

// explainIndex reads an index whose stanzas are not the manifest's packages again, in
// full, and returns the refusal that says how they differ.
func (s *Server) explainIndex(ctx context.Context, ix *index, m *manifest.Manifest) error {
	var entries []deb.IndexEntry
	if _, err := s.readForm(ctx, ix, ix.forms[0], func(e *deb.IndexEntry) error {
		entries = append(entries, *e)
		return nil
	}); err != nil {
		return err
	}
	byPath := make(map[string][]*deb.IndexEntry, len(entries))
	for i := range entries {
		e := &entries[i]
		byPath[e.Path] = append(byPath[e.Path], e)
	}
	var problems []string
	claimed := map[string]bool{}
	for _, i := range ix.members {
		p := &m.Packages[i]
		claimed[p.Path] = true
		es := byPath[p.Path]
		switch {
		case len(es) == 0:
			problems = append(problems, fmt.Sprintf("package %s: the signed index does not list it", describe(p)))
		case len(es) > 1:
			problems = append(problems, fmt.Sprintf("package %s: the signed index lists %s %d times", describe(p), p.Path, len(es)))
		default:
			if d := differences(p, es[0]); d != "" {
				problems = append(problems, fmt.Sprintf("package %s: %s", describe(p), d))
			}
		}
	}
	for i := range entries {
		if e := &entries[i]; !claimed[e.Path] {
			problems = append(problems, fmt.Sprintf("the signed index lists %s %s (%s) at %s (line %d), which the manifest lacks",
				e.Name, e.Version, e.Architecture, e.Path, e.Line))
		}
	}
	if len(problems) == 0 {
		// The digests differ, but no field does: a package the manifest lists in the
		// index twice, under two identities.
		problems = append(problems, "the signed index and the manifest list different packages")
	}
	return invalidRelease("%s: the manifest's packages are not those the signed index lists: %s: serve exactly what armor build wrote",
		ix.label(), listSome(problems))
}

// differences says how a package of the manifest differs from its stanza.
func differences(p *manifest.Package, e *deb.IndexEntry) string {
	var out []string
	field := func(what, manifest, index string) {
		if manifest != index {
			out = append(out, fmt.Sprintf("the manifest has %s %q, the signed index %q", what, manifest, index))
		}
	}
	field("name", p.Name, e.Name)
	field("version", p.Version, e.Version)
	field("architecture", p.Architecture, e.Architecture)
	if p.SHA256 != e.SHA256 || p.Size != e.Size {
		out = append(out, fmt.Sprintf("the manifest has sha256 %s and size %d, the signed index (line %d) sha256 %s and size %d",
			p.SHA256, p.Size, e.Line, e.SHA256, e.Size))
	}
	field("phased update percentage", p.Phased, e.Phased)
	a := slices.Clone(p.Files)
	b := slices.Clone(e.Files)
	for _, l := range [][]manifest.File{a, b} {
		slices.SortFunc(l, func(x, y manifest.File) int { return strings.Compare(x.Path, y.Path) })
	}
	if !slices.Equal(a, b) {
		out = append(out, fmt.Sprintf("the manifest has source files %v, the signed index %v", a, b))
	}
	return strings.Join(out, "; ")
}
