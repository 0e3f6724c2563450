package gen

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/armor-apt/armor/debian/deb"
	"github.com/armor-apt/armor/debian/release"
	"github.com/armor-apt/armor/gen/tree"
	"github.com/armor-apt/armor/manifest"
	"github.com/klauspost/compress/gzip"
	"golang.org/x/sync/errgroup"
)

// Contents files say which package installs which file, for apt-file: one per component
// and architecture, dists/<codename>/<component>/Contents-<arch> (and Contents-udeb-<arch>
// for a component with .udeb packages), served plain and as .gz with by-hash copies, and
// listed in Release. The format is Debian's (dak's, without the header it dropped in
// 2016): one line per path, sorted by path, the path padded to 55 columns, a space, and
// the comma-separated [section/]name of every package that installs it, sorted by name.
// As in dak, a package's name counts once per index, with the files of its newest version;
// Architecture: all packages are listed in every architecture's file.
//
// A release is its parent plus a change, and so is its Contents file: the parent's file
// (in the tree, or fetched into it by hydrate) gives the lines of every package the change
// leaves alone, and only the packages added or replaced are read: from this build's .deb
// reads, from the build cache (contentscache.go), from an input, or from the store.

// contentsKey names one Contents file.
type contentsKey struct {
	suite, component, arch string
	udeb                   bool
}

// contentsName is the file's path relative to dists/<codename>/.
func (k contentsKey) name() string {
	if k.udeb {
		return k.component + "/Contents-udeb-" + k.arch
	}
	return k.component + "/Contents-" + k.arch
}

// contentsVariants are the forms of a Contents file Release lists: the uncompressed one,
// not published (see plain.go), and the .gz, as in Debian's archive.
var contentsVariants = []string{"", ".gz"}

// contentsColumn is the width dak pads paths to.
const contentsColumn = 55

// contentsWriter writes the Contents files of a build: what writing any of them needs,
// and what was made so far (out; out.written counts Contents files).
type contentsWriter struct {
	dirs        dirs
	verify      bool
	par         *parent
	tw          *tree.Writer
	lists       *fileLists
	members     map[contentsKey][]*manifest.Package // the release's, by file
	prevMembers map[contentsKey][]*manifest.Package // the parent's
	byHash      map[string]bool                     // by-hash paths listed in out.files
	out         indexesMade
}

// writeContents stages every Contents file whose packages changed and reuses the others,
// and returns their entries: the files for the manifest, the sums for their suite's
// Release (in the order of sp.suites), and the uncompressed files for the build cache.
func writeContents(ctx context.Context, sp indexSpec, par *parent, pkgs []manifest.Package, ins *inputSet, tw *tree.Writer) (indexesMade, error) {
	w := &contentsWriter{dirs: sp.dirs, verify: sp.verify, par: par, tw: tw,
		lists:   newFileLists(sp.dirs.cache, sp.fetch, ins),
		members: groupContents(pkgs, sp.suites), prevMembers: groupContents(par.packages(), sp.suites),
		// Contents files of one component share a by-hash directory, and two of them may
		// have the same content (the Architecture: all packages alone, or none).
		byHash: map[string]bool{},
		out:    newIndexesMade(len(sp.suites)),
	}
	w.lists.fromParent = (&parentLists{dirs: sp.dirs, par: par, members: w.prevMembers}).find
	for sum, in := range ins.fresh {
		if in.Pkg != nil {
			w.lists.remember(sum, fileListOf(in.Pkg))
		}
	}
	for si, s := range sp.suites {
		dist := "dists/" + s.Codename + "/"
		prevSums := previousReleaseSums(sp.dirs.tree, dist+"Release", par.files)
		for _, comp := range s.Components {
			for _, arch := range s.Architectures {
				for _, udeb := range []bool{false, true} {
					if err := ctx.Err(); err != nil {
						return w.out, err
					}
					if err := w.write(ctx, &w.out.suites[si], contentsKey{s.Codename, comp, arch, udeb}, prevSums); err != nil {
						return w.out, err
					}
				}
			}
		}
	}
	w.lists.save()
	return w.out, nil
}

// write stages the Contents file key names, or reuses the parent's when its packages did
// not change, and adds what it made to si and w.out.
func (w *contentsWriter) write(ctx context.Context, si *suiteIndexes, key contentsKey, prevSums map[string]release.Digests) error {
	dist := "dists/" + key.suite + "/"
	sel, prevSel := newestByName(w.members[key]), newestByName(w.prevMembers[key])
	w.lists.listed(sel)
	if key.udeb && len(sel) == 0 {
		return nil // Contents-udeb only where there are udebs
	}
	rel := key.name()
	if kept, ok := reusableContents(w.dirs.tree, w.verify, w.par.files, prevSums, dist, rel, sel, prevSel); ok {
		for _, v := range contentsVariants {
			si.sums[rel+v] = prevSums[rel+v]
		}
		for _, f := range kept {
			if strings.Contains(f.Path, "/by-hash/") {
				w.listByHash(f)
			} else {
				w.out.files = append(w.out.files, f)
			}
		}
		return nil
	}
	base, _ := parentPlain(w.dirs, dist+rel, w.par.plains[dist+rel])
	plain, err := buildContents(ctx, base, sel, prevSel, w.lists)
	if err != nil {
		return fmt.Errorf("contents %s%s: %w", dist, rel, err)
	}
	err = stageContents(w.tw, dist+rel, plain, func(v int, d release.Digests) bool {
		si.sums[rel+contentsVariants[v]] = d
		if contentsVariants[v] == "" {
			w.out.plains = append(w.out.plains, plainIndex{dist + rel, d.SHA256, plain})
			return false
		}
		w.out.files = append(w.out.files, manifest.File{Path: dist + rel + contentsVariants[v], Size: d.Size, SHA256: d.SHA256})
		return w.listByHash(manifest.File{Path: byHashPath(dist+rel, d.SHA256), Size: d.Size, SHA256: d.SHA256})
	})
	if err != nil {
		return fmt.Errorf("contents %s%s: %w", dist, rel, err)
	}
	si.changed = true
	w.out.written++
	return nil
}

// listByHash lists the by-hash file f, unless another Contents file listed it; it reports
// whether it did.
func (w *contentsWriter) listByHash(f manifest.File) bool {
	if w.byHash[f.Path] {
		return false
	}
	w.byHash[f.Path] = true
	w.out.files = append(w.out.files, f)
	return true
}

// groupContents sorts packages (in canonical order) into the Contents files that list
// them: their own architecture's, or every architecture of the suite for
// Architecture: all; udebs apart.
func groupContents(pkgs []manifest.Package, suites []Suite) map[contentsKey][]*manifest.Package {
	archs := make(map[string][]string, len(suites))
	for _, s := range suites {
		archs[s.Codename] = s.Architectures
	}
	var g grouper[contentsKey]
	for i := range pkgs {
		p := &pkgs[i]
		udeb := strings.HasSuffix(p.Path, ".udeb")
		if p.Architecture != "all" {
			g.add(contentsKey{p.Suite, p.Component, p.Architecture, udeb}, p)
			continue
		}
		for _, a := range archs[p.Suite] {
			g.add(contentsKey{p.Suite, p.Component, a, udeb}, p)
		}
	}
	return g.groups()
}

// newestByName returns, of packages in canonical order (grouped by name), the newest
// version of each name: the package a Contents file describes. Of two packages of the
// same version (Architecture: all and the file's own), the later in canonical order wins.
func newestByName(members []*manifest.Package) []*manifest.Package {
	var out []*manifest.Package
	for _, p := range members {
		if n := len(out); n > 0 && out[n-1].Name == p.Name {
			if compareVersions(p.Version, out[n-1].Version) >= 0 {
				out[n-1] = p
			}
			continue
		}
		out = append(out, p)
	}
	return out
}

// reusableContents returns the manifest entries of a Contents file whose packages did
// not change and whose files the tree and the previous Release still vouch for.
func reusableContents(tree string, verify bool, prevFiles map[string]manifest.File, prevSums map[string]release.Digests, dist, rel string, sel, prevSel []*manifest.Package) ([]manifest.File, bool) {
	if _, ok := prevSums[rel]; !ok {
		return nil, false
	}
	return reusableFiles(tree, verify, prevFiles, prevSums, dist, rel, contentsVariants[1:], func() bool { return slices.EqualFunc(sel, prevSel, sameFiles) })
}

// buildContents returns the Contents file of the packages sel. base is the parent's
// file, whose packages were prevSel, or nil: then every package's files are looked up.
func buildContents(ctx context.Context, base []byte, sel, prevSel []*manifest.Package, lists *fileLists) ([]byte, error) {
	if base == nil && len(prevSel) > 0 {
		prevSel = nil // the parent's file is gone: every package is looked up
	}
	// The names whose lines go (left, or replaced by another version), and the packages
	// whose lines come.
	prevByName := make(map[string]*manifest.Package, len(prevSel))
	for _, p := range prevSel {
		prevByName[p.Name] = p
	}
	gone := map[string]bool{}
	var added []*manifest.Package
	for _, p := range sel {
		if old, ok := prevByName[p.Name]; ok {
			delete(prevByName, p.Name)
			if sameFiles(old, p) {
				continue
			}
			gone[p.Name] = true
		}
		added = append(added, p)
	}
	for name := range prevByName {
		gone[name] = true
	}
	fresh, err := lists.get(ctx, added)
	if err != nil {
		return nil, err
	}
	return mergeContents(base, gone, fresh), nil
}

// contentsEntry is one path of one package.
type contentsEntry struct {
	path, name, qualified string
}

// mergeContents returns base less the packages named in gone, plus the files of added.
func mergeContents(base []byte, gone map[string]bool, added []fileList) []byte {
	var fresh []contentsEntry
	for _, l := range added {
		q := l.name
		if l.section != "" {
			q = l.section + "/" + l.name
		}
		for _, f := range l.files {
			fresh = append(fresh, contentsEntry{f, l.name, q})
		}
	}
	slices.SortFunc(fresh, func(a, b contentsEntry) int {
		return cmp.Or(strings.Compare(a.path, b.path), strings.Compare(a.name, b.name))
	})
	out := make([]byte, 0, len(base)+len(fresh)*(contentsColumn+32))
	var items []string
	for len(base) > 0 || len(fresh) > 0 {
		var line []byte
		var path string
		if len(base) > 0 {
			end := bytes.IndexByte(base, '\n')
			if end < 0 {
				end = len(base) - 1
				base = append(base, '\n') // a last line without its newline
			}
			line = base[:end]
			path = string(contentsPath(line))
		}
		switch {
		case len(base) > 0 && (len(fresh) == 0 || path < fresh[0].path):
			base = base[len(line)+1:]
			if path == "" {
				continue // not a Contents line
			}
			if len(gone) == 0 {
				out = append(out, line...)
				out = append(out, '\n')
				continue
			}
			items = keptItems(items[:0], line, gone)
			out = appendContentsLine(out, path, items)
		case len(base) > 0 && path == fresh[0].path:
			base = base[len(line)+1:]
			items = keptItems(items[:0], line, gone)
			for len(fresh) > 0 && fresh[0].path == path {
				items = append(items, fresh[0].qualified)
				fresh = fresh[1:]
			}
			slices.SortFunc(items, func(a, b string) int { return strings.Compare(itemName(a), itemName(b)) })
			out = appendContentsLine(out, path, slices.Compact(items))
		default:
			path = fresh[0].path
			items = items[:0]
			for len(fresh) > 0 && fresh[0].path == path {
				items = append(items, fresh[0].qualified)
				fresh = fresh[1:]
			}
			out = appendContentsLine(out, path, slices.Compact(items))
		}
	}
	return out
}

// contentsPath returns the path of a Contents line: what comes before the last run of
// blanks. Paths may hold blanks; package lists do not.
func contentsPath(line []byte) []byte {
	i := bytes.LastIndexAny(line, " \t")
	if i <= 0 {
		return nil
	}
	return bytes.TrimRight(line[:i], " \t")
}

// keptItems appends the packages of a Contents line that are not in gone.
func keptItems(items []string, line []byte, gone map[string]bool) []string {
	list := string(line[bytes.LastIndexAny(line, " \t")+1:])
	for list != "" {
		var it string
		it, list, _ = strings.Cut(list, ",")
		if it != "" && !gone[itemName(it)] {
			items = append(items, it)
		}
	}
	return items
}

// itemName returns the package name of a qualified [[area/]section/]name.
func itemName(q string) string { return q[strings.LastIndexByte(q, '/')+1:] }

func appendContentsLine(out []byte, path string, items []string) []byte {
	if len(items) == 0 {
		return out
	}
	out = append(out, path...)
	for n := len(path); n < contentsColumn; n++ {
		out = append(out, ' ')
	}
	out = append(out, ' ')
	for i, it := range items {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, it...)
	}
	return append(out, '\n')
}

// stageContents stages a Contents file gzipped, with its by-hash copy unless list says
// another file of the same content has it. list is told each form's digests, by its
// index in contentsVariants, the uncompressed form's too, which is not published.
func stageContents(tw *tree.Writer, p string, plain []byte, list func(v int, d release.Digests) bool) error {
	gz, err := gzipContents(plain)
	if err != nil {
		return err
	}
	list(0, digestsOf(plain))
	d := digestsOf(gz)
	f, also := p+contentsVariants[1], []string{byHashPath(p, d.SHA256)}
	if !list(1, d) {
		also = nil
	}
	tw.Go(func() error {
		if err := tw.WriteFile(f, gz, also...); err != nil {
			return fmt.Errorf("contents %s: %w", f, err)
		}
		return nil
	})
	return nil
}

// contentsMember is the plain size from which a Contents file is compressed as several
// gzip members on all cores; apt reads the members as one stream.
const contentsMember = 4 << 20

// gzipContents compresses a Contents file: at a fast level (it is rewritten whenever a
// package of its index changes), in members of about contentsMember plain bytes each cut
// after a line, compressed in parallel.
func gzipContents(plain []byte) ([]byte, error) {
	var parts [][]byte
	for rest := plain; len(rest) > 0; {
		n := len(rest)
		if n > contentsMember {
			n = contentsMember + bytes.IndexByte(rest[contentsMember:], '\n') + 1
			if n <= contentsMember {
				n = len(rest)
			}
		}
		parts = append(parts, rest[:n])
		rest = rest[n:]
	}
	if len(parts) == 0 {
		parts = [][]byte{nil}
	}
	out := make([][]byte, len(parts))
	var g errgroup.Group
	g.SetLimit(runtime.GOMAXPROCS(0))
	for i, part := range parts {
		g.Go(func() error {
			var b bytes.Buffer
			zw, err := gzip.NewWriterLevel(&b, contentsGzipLevel)
			if err != nil {
				return err
			}
			if _, err := zw.Write(part); err != nil {
				return err
			}
			if err := zw.Close(); err != nil {
				return err
			}
			out[i] = b.Bytes()
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return bytes.Join(out, nil), nil
}

const contentsGzipLevel = gzip.BestSpeed

// fileList is what a Contents file needs of one package.
type fileList struct {
	name, section string
	files         []string
}

// fileListOf returns a package's file list from the package as read.
func fileListOf(pkg *deb.Package) fileList {
	sec, _ := pkg.Value("Section")
	return fileList{name: pkg.Name, section: strings.TrimSpace(sec), files: pkg.Files}
}

// parentLists finds file lists in the parent's Contents files, for packages copied
// between suites or components: each file it needs is read and split once per build.
type parentLists struct {
	dirs    dirs
	par     *parent
	members map[contentsKey][]*manifest.Package // the parent's, by Contents file

	mu     sync.Mutex
	where  map[string][]contentsKey            // by SHA-256: the files listing the package
	byName map[contentsKey]map[string]fileList // nil for a file the tree lacks
}

// find returns the file list of p from a Contents file of the parent that lists p's very
// file: p is the newest of its name there.
func (l *parentLists) find(p *manifest.Package) (fileList, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.where == nil {
		l.where = map[string][]contentsKey{}
		l.byName = map[contentsKey]map[string]fileList{}
		for k, m := range l.members {
			for _, q := range newestByName(m) {
				l.where[q.SHA256] = append(l.where[q.SHA256], k)
			}
		}
		for _, keys := range l.where {
			slices.SortFunc(keys, func(a, b contentsKey) int {
				return strings.Compare(a.suite+"/"+a.name(), b.suite+"/"+b.name())
			})
		}
	}
	for _, k := range l.where[p.SHA256] {
		lists, done := l.byName[k]
		if !done {
			lists = l.split(k)
			l.byName[k] = lists
		}
		if fl, ok := lists[p.Name]; ok {
			return fl, true
		}
	}
	return fileList{}, false
}

// split reads a Contents file of the parent into the file list of each package name.
func (l *parentLists) split(k contentsKey) map[string]fileList {
	p := "dists/" + k.suite + "/" + k.name()
	data, ok := parentPlain(l.dirs, p, l.par.plains[p])
	if !ok {
		return nil
	}
	out := map[string]fileList{}
	for len(data) > 0 {
		line, rest, _ := bytes.Cut(data, []byte("\n"))
		data = rest
		path := contentsPath(line)
		if len(path) == 0 {
			continue
		}
		for _, it := range strings.Split(string(line[bytes.LastIndexAny(line, " \t")+1:]), ",") {
			name := itemName(it)
			fl := out[name]
			fl.name, fl.section = name, strings.TrimSuffix(it[:len(it)-len(name)], "/")
			fl.files = append(fl.files, string(path))
			out[name] = fl
		}
	}
	return out
}

// sameFiles reports whether two entries are the same package file in the same place: what
// a Contents file says of them (a phasing, say, does not change it).
func sameFiles(a, b *manifest.Package) bool {
	return a.Key() == b.Key() && a.Path == b.Path && a.SHA256 == b.SHA256
}
