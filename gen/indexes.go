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
		sums := map[string]Digests{}
		changed := false
		for _, comp := range s.Components {
			for _, arch := range s.Architectures {
				if err := ctx.Err(); err != nil {
					return err
				}
				rel := comp + "/binary-" + arch + "/Packages"
				key := indexKey{s.Codename, comp, arch}
				if b.reuseIndex(dist, rel, members[key], prevMembers[key], prevSums, prevFiles, sums) {
					done++
					b.progress("index", done, total)
					continue
				}
				if err := b.writeIndex(dist, rel, members[key], sums); err != nil {
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
func (b *builder) previousReleaseSums(rel string, prevFiles map[string]manifest.File) map[string]Digests {
	want, ok := prevFiles[rel]
	if !ok {
		return nil
	}
	data, err := os.ReadFile(filepath.Join(b.o.TreeDir, filepath.FromSlash(rel)))
	if err != nil || int64(len(data)) != want.Size || sha256Hex(data) != want.SHA256 {
		return nil
	}
	sums, err := ParseReleaseSums(data)
	if err != nil {
		return nil
	}
	return sums
}

var variants = []string{"", ".gz", ".xz"}

// reuseIndex keeps an index whose package list did not change and whose files the tree
// and the previous Release still vouch for.
func (b *builder) reuseIndex(dist, rel string, members, old []*manifest.Package, prevSums map[string]Digests, prevFiles map[string]manifest.File, sums map[string]Digests) bool {
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
func (b *builder) writeIndex(dist, rel string, members []*manifest.Package, sums map[string]Digests) error {
	stanzas, err := b.stanzas(dist+rel, members)
	if err != nil {
		return err
	}
	files, err := index.Build(stanzas, b.icache)
	if err != nil {
		return err
	}
	for i, data := range [][]byte{files.Plain, files.Gzip, files.Xz} {
		p := dist + rel + variants[i]
		d := digestsOf(data)
		sums[rel+variants[i]] = d
		bh := byHashPath(dist+rel, d.SHA256)
		if err := b.tw.WriteFile(p, data, bh); err != nil {
			return err
		}
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
// .deb when the tree does not have them.
func (b *builder) stanzas(indexPath string, members []*manifest.Package) ([][]byte, error) {
	var old map[string][]byte
	out := make([][]byte, 0, len(members))
	for _, p := range members {
		in := b.bySum[p.SHA256]
		if in != nil && in.pkg != nil {
			out = append(out, in.pkg.Stanza(p.Path))
			continue
		}
		if old == nil {
			old = b.oldStanzas(indexPath)
		}
		if st, ok := old[p.SHA256]; ok && bytes.Contains(st, []byte("\nFilename: "+p.Path+"\n")) {
			out = append(out, st)
			continue
		}
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

// oldStanzas splits the tree's current Packages file into stanzas keyed by the SHA256 of
// the .deb they describe. A missing or unreadable file gives an empty map.
func (b *builder) oldStanzas(indexPath string) map[string][]byte {
	out := map[string][]byte{}
	data, err := os.ReadFile(filepath.Join(b.o.TreeDir, filepath.FromSlash(indexPath)))
	if err != nil {
		return out
	}
	for len(data) > 0 {
		end := bytes.Index(data, []byte("\n\n"))
		var st []byte
		if end < 0 {
			st, data = data, nil
		} else {
			st, data = data[:end+1], data[end+2:]
		}
		if i := bytes.LastIndex(st, []byte("\nSHA256: ")); i >= 0 {
			rest := st[i+len("\nSHA256: "):]
			if j := bytes.IndexByte(rest, '\n'); j == 64 {
				out[string(rest[:64])] = st
			}
		}
	}
	return out
}

// digestsOf computes the three sums Release lists, in parallel: an index of 100,000
// packages is tens of megabytes.
func digestsOf(data []byte) Digests {
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
	return Digests{
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
