package gen

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/armor-apt/armor/gen/deb"
	"github.com/armor-apt/armor/gen/index"
	"github.com/armor-apt/armor/gen/release"
	"github.com/armor-apt/armor/manifest"
)

// generate writes (stages) every index and Release whose content changed, and collects
// the manifest's file entries for all of them, reused or new.
func (b *builder) generate(ctx context.Context) error {
	prevFiles := map[string]manifest.File{}
	var prevPackages []manifest.Package
	if b.o.Previous != nil {
		for _, f := range b.o.Previous.Files {
			prevFiles[f.Path] = f
		}
		prevPackages = b.o.Previous.Packages
	}
	members := groupIndexes(b.packages, b.o.Suites)
	prevMembers := groupIndexes(prevPackages, b.o.Suites)
	total := 0
	for _, s := range b.o.Suites {
		total += len(s.Components) * len(s.Architectures)
	}
	done := 0
	for _, s := range b.o.Suites {
		dist := "dists/" + s.Codename + "/"
		prevSums := b.previousReleaseSums(dist+"Release", prevFiles)
		sums := map[string]release.Digests{}
		changed := false
		for _, comp := range s.Components {
			for _, arch := range s.Architectures {
				if err := ctx.Err(); err != nil {
					return err
				}
				rel := comp + "/binary-" + arch + "/Packages"
				key := indexKey{s.Codename, comp, arch}
				if b.reuseIndex(dist, rel, members[key], prevMembers[key], prevSums, prevFiles, sums) {
					b.old.drop(dist + rel)
					done++
					b.progress("index", done, total)
					continue
				}
				err := b.writeIndex(dist, rel, members[key], prevMembers[key], sums)
				// An index whose every member was read afresh never took its old copy.
				b.old.drop(dist + rel)
				if err != nil {
					return fmt.Errorf("index %s%s: %w", dist, rel, err)
				}
				changed = true
				done++
				b.progress("index", done, total)
			}
		}
		if err := b.writeRelease(s, dist, sums, changed, prevFiles); err != nil {
			return err
		}
	}
	slices.SortFunc(b.files, func(x, y manifest.File) int { return strings.Compare(x.Path, y.Path) })
	return nil
}

// indexKey names one binary-<arch>/Packages index.
type indexKey struct{ suite, component, arch string }

// groupIndexes sorts packages (in canonical order) into the indexes that list them: its
// own architecture's, or every architecture of its suite for Architecture: all. Order
// within an index is the canonical order.
func groupIndexes(pkgs []manifest.Package, suites []Suite) map[indexKey][]*manifest.Package {
	archs := make(map[string][]string, len(suites))
	for _, s := range suites {
		archs[s.Codename] = s.Architectures
	}
	out := map[indexKey][]*manifest.Package{}
	for i := range pkgs {
		p := &pkgs[i]
		if p.Architecture != "all" {
			k := indexKey{p.Suite, p.Component, p.Architecture}
			out[k] = append(out[k], p)
			continue
		}
		for _, a := range archs[p.Suite] {
			k := indexKey{p.Suite, p.Component, a}
			out[k] = append(out[k], p)
		}
	}
	return out
}

// previousReleaseSums reads the previous Release from the tree, if it is the one the
// previous manifest lists, for the MD5 and SHA1 sums of reused indexes.
func (b *builder) previousReleaseSums(rel string, prevFiles map[string]manifest.File) map[string]release.Digests {
	want, ok := prevFiles[rel]
	if !ok {
		return nil
	}
	data, err := os.ReadFile(filepath.Join(b.o.TreeDir, filepath.FromSlash(rel)))
	if err != nil || int64(len(data)) != want.Size || sha256Hex(data) != want.SHA256 {
		return nil
	}
	f, err := release.Parse(data)
	if err != nil {
		return nil
	}
	return f.Sums
}

var variants = []string{"", ".gz", ".xz"}

// reuseIndex keeps an index whose package list did not change and whose files the tree
// and the previous Release still vouch for.
func (b *builder) reuseIndex(dist, rel string, members, old []*manifest.Package, prevSums map[string]release.Digests, prevFiles map[string]manifest.File, sums map[string]release.Digests) bool {
	if prevSums == nil || b.o.Verify || !slices.EqualFunc(members, old, func(a, b *manifest.Package) bool { return *a == *b }) {
		return false
	}
	var keep []manifest.File
	for _, v := range variants {
		d, ok := prevSums[rel+v]
		f, ok2 := prevFiles[dist+rel+v]
		if !ok || !ok2 || d.SHA256 != f.SHA256 || d.Size != f.Size {
			return false
		}
		if st, err := os.Stat(filepath.Join(b.o.TreeDir, filepath.FromSlash(dist+rel+v))); err != nil || st.Size() != f.Size {
			return false
		}
		bh, ok := prevFiles[byHashPath(dist+rel, f.SHA256)]
		if !ok {
			return false
		}
		keep = append(keep, f, bh)
	}
	for _, v := range variants {
		sums[rel+v] = prevSums[rel+v]
	}
	b.files = append(b.files, keep...)
	return true
}

func byHashPath(indexPath, sum string) string {
	return path.Dir(indexPath) + "/by-hash/SHA256/" + sum
}

// writeIndex regenerates one Packages index in its three forms.
func (b *builder) writeIndex(dist, rel string, members, old []*manifest.Package, sums map[string]release.Digests) error {
	stanzas, err := b.stanzas(dist+rel, members, old)
	if err != nil {
		return err
	}
	files, err := index.Build(stanzas, b.icache, dist+rel)
	if err != nil {
		return err
	}
	for i, data := range [][]byte{files.Plain, files.Gzip, files.Xz} {
		p := dist + rel + variants[i]
		d := files.Digests[i]
		sums[rel+variants[i]] = d
		bh := byHashPath(dist+rel, d.SHA256)
		// The writes go on while the next index is built and Release is signed.
		b.tw.Go(func() error {
			if err := b.tw.WriteFile(p, data, bh); err != nil {
				return fmt.Errorf("index %s: %w", p, err)
			}
			return nil
		})
		b.files = append(b.files,
			manifest.File{Path: p, Size: d.Size, SHA256: d.SHA256},
			manifest.File{Path: bh, Size: d.Size, SHA256: d.SHA256})
	}
	b.wrote = true
	b.stats.IndexesWritten++
	return nil
}

// stanzas returns the Packages stanzas of members: fresh from the .deb for files read in
// this build, reused from the index in the tree for the others, and read again from the
// .deb when the tree does not have them. old lists the index's members in the previous
// release, the order the tree's index lists their stanzas in.
func (b *builder) stanzas(indexPath string, members, old []*manifest.Package) ([][]byte, error) {
	var prev *oldIndex
	out := make([][]byte, 0, len(members))
	for _, p := range members {
		if in := b.fresh[p.SHA256]; in != nil {
			out = append(out, in.pkg.Stanza(p.Path))
			continue
		}
		if prev == nil {
			prev = b.readOldIndex(indexPath, old)
		}
		if st := prev.find(p); st != nil {
			out = append(out, st)
			continue
		}
		in := b.inputFor(p.SHA256)
		if in == nil {
			return nil, fmt.Errorf("no input file for %s %s", p.Name, p.Version)
		}
		pkg, err := deb.ReadFile(in.Path)
		if err != nil {
			return nil, err
		}
		in.pkg = pkg
		out = append(out, pkg.Stanza(p.Path))
	}
	return out, nil
}

// oldIndex is the tree's current Packages file, split into stanzas.
type oldIndex struct {
	stanzas [][]byte
	sums    [][]byte // the SHA256 field of each stanza
	// members[i] is the package of stanzas[i], when the file lists exactly the previous
	// release's members in order: then stanzas are found by walking both lists together.
	members []*manifest.Package
	next    int
	bySum   map[string]int // otherwise, stanzas by SHA256; made when first needed
}

// readOldIndex returns the tree's copy of an index, split, with members (the previous
// release's members of the index) attached: prefetched if it was, read now otherwise.
func (b *builder) readOldIndex(indexPath string, members []*manifest.Package) *oldIndex {
	x := b.old.take(indexPath)
	if x == nil {
		x = loadOldIndex(filepath.Join(b.o.TreeDir, filepath.FromSlash(indexPath)), len(members))
	}
	x.attach(members)
	return x
}

// loadOldIndex reads and splits an index file, expecting about n stanzas. A missing or
// unreadable file gives an index of no stanzas.
func loadOldIndex(file string, n int) *oldIndex {
	x := &oldIndex{}
	data, err := os.ReadFile(file)
	if err != nil {
		return x
	}
	x.stanzas, x.sums = make([][]byte, 0, n+1), make([][]byte, 0, n+1)
	for len(data) > 0 {
		end := bytes.Index(data, []byte("\n\n"))
		var st []byte
		if end < 0 {
			st, data = data, nil
		} else {
			st, data = data[:end+1], data[end+2:]
		}
		x.stanzas = append(x.stanzas, st)
		x.sums = append(x.sums, stanzaField(st, "\nSHA256: "))
	}
	return x
}

// attach notes members as the packages of the stanzas, when the file lists exactly them
// in order: then find walks both lists together.
func (x *oldIndex) attach(members []*manifest.Package) {
	if len(members) != len(x.stanzas) {
		return
	}
	for i, p := range members {
		if p.SHA256 != string(x.sums[i]) {
			return
		}
	}
	x.members = members
}

// prefetch reads the tree's indexes of the previous release in the background, in the
// order generate visits them, while the inputs are listed: at 100,000 packages, reading
// and splitting the old index is a tenth of a second that the walk leaves a core free
// for. It stops before the indexes read exceed a budget, so that a repository of many
// large indexes does not hold them all at once; generate reads the rest itself. A nil
// *prefetch holds nothing.
type prefetch struct {
	mu      sync.Mutex
	pending map[string]chan *oldIndex // read, or to be read, and not taken yet
	dropped map[string]bool           // no longer wanted: not to be read
}

// prefetchBudget is how many bytes of old indexes a build reads ahead, at most.
var prefetchBudget int64 = 256 << 20

// startPrefetch starts reading ahead the indexes prev lists, on a goroutine that stops
// when Build returns.
func (b *builder) startPrefetch(prev *manifest.Manifest) *prefetch {
	pf := &prefetch{pending: map[string]chan *oldIndex{}, dropped: map[string]bool{}}
	if prev == nil || b.o.Verify {
		return pf
	}
	type job struct {
		rel string
		n   int
		ch  chan *oldIndex
	}
	var jobs []job
	budget := prefetchBudget
indexes:
	for _, s := range b.o.Suites {
		for _, comp := range s.Components {
			for _, arch := range s.Architectures {
				rel := "dists/" + s.Codename + "/" + comp + "/binary-" + arch + "/Packages"
				i, ok := slices.BinarySearchFunc(prev.Files, rel, func(f manifest.File, p string) int { return strings.Compare(f.Path, p) })
				if !ok {
					continue
				}
				if budget -= prev.Files[i].Size; budget < 0 {
					break indexes
				}
				// A stanza is about a kilobyte: the estimate only sizes the slices.
				j := job{rel, int(prev.Files[i].Size/1024) + 1, make(chan *oldIndex, 1)}
				pf.pending[rel] = j.ch
				jobs = append(jobs, j)
			}
		}
	}
	b.bg.Add(1)
	go func() {
		defer b.bg.Done()
		for _, j := range jobs {
			select {
			case <-b.stop:
				return
			default:
			}
			pf.mu.Lock()
			skip := pf.dropped[j.rel]
			pf.mu.Unlock()
			if !skip {
				j.ch <- loadOldIndex(filepath.Join(b.o.TreeDir, filepath.FromSlash(j.rel)), j.n)
			}
		}
	}()
	return pf
}

// take returns the prefetched index at rel, waiting for it, or nil if it was not
// prefetched.
func (pf *prefetch) take(rel string) *oldIndex {
	if pf == nil {
		return nil
	}
	pf.mu.Lock()
	ch := pf.pending[rel]
	delete(pf.pending, rel)
	pf.mu.Unlock()
	if ch == nil {
		return nil
	}
	return <-ch
}

// drop forgets the index at rel, which generate is done with: if it is not read yet, it
// will not be; if it is, it is garbage.
func (pf *prefetch) drop(rel string) {
	if pf == nil {
		return
	}
	pf.mu.Lock()
	if _, ok := pf.pending[rel]; ok {
		delete(pf.pending, rel)
		pf.dropped[rel] = true
	}
	pf.mu.Unlock()
}

// find returns the stanza of p, or nil. Calls come in canonical order.
func (x *oldIndex) find(p *manifest.Package) []byte {
	i := -1
	if x.members != nil {
		for x.next < len(x.members) && comparePackages(*x.members[x.next], *p) < 0 {
			x.next++
		}
		if x.next < len(x.members) && *x.members[x.next] == *p {
			i = x.next
		}
	} else {
		if x.bySum == nil {
			x.bySum = make(map[string]int, len(x.stanzas))
			for i, sum := range x.sums {
				x.bySum[string(sum)] = i
			}
		}
		if j, ok := x.bySum[p.SHA256]; ok {
			i = j
		}
	}
	// The stanza must describe this very file at this very path.
	if i < 0 || string(x.sums[i]) != p.SHA256 || string(stanzaField(x.stanzas[i], "\nFilename: ")) != p.Path {
		return nil
	}
	return x.stanzas[i]
}

// stanzaField returns the value of the field whose "\nName: " prefix is given, or nil.
// Packages stanzas end with Filename, Size, MD5sum, SHA1 and SHA256, so it looks at the
// last lines first: a stanza is a kilobyte, and this runs once per reused package.
func stanzaField(st []byte, prefix string) []byte {
	end := len(st) - 1 // the stanza's final newline
	for range 5 {
		if end <= 0 {
			break
		}
		start := bytes.LastIndexByte(st[:end], '\n')
		if start < 0 {
			break
		}
		if line := st[start:end]; bytes.HasPrefix(line, []byte(prefix)) {
			return line[len(prefix):]
		}
		end = start
	}
	i := bytes.LastIndex(st, []byte(prefix))
	if i < 0 {
		return nil
	}
	rest := st[i+len(prefix):]
	if j := bytes.IndexByte(rest, '\n'); j >= 0 {
		return rest[:j]
	}
	return nil
}

// digestsOf computes the three sums Release lists, in parallel: an index of 100,000
// packages is tens of megabytes.
func digestsOf(data []byte) release.Digests {
	hs := []hash.Hash{md5.New(), sha1.New(), sha256.New()}
	var wg sync.WaitGroup
	for _, h := range hs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h.Write(data)
		}()
	}
	wg.Wait()
	return release.Digests{
		Size:   int64(len(data)),
		MD5:    hex.EncodeToString(hs[0].Sum(nil)),
		SHA1:   hex.EncodeToString(hs[1].Sum(nil)),
		SHA256: hex.EncodeToString(hs[2].Sum(nil)),
	}
}

func sha256Hex(data []byte) string {
	s := sha256.Sum256(data)
	return hex.EncodeToString(s[:])
}

func fileSHA256(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
