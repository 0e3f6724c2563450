package gen

import (
	"bytes"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	"github.com/armor-apt/armor/debian/deb"
	"github.com/armor-apt/armor/debian/pool"
	"github.com/armor-apt/armor/debian/release"
	"github.com/armor-apt/armor/manifest"
)

// Source packages. A .dsc among the inputs is a package of architecture "source": its
// manifest entry's path is the .dsc in pool/<component>/<prefix>/<source>/, and its Files
// are the files the .dsc names, found beside the .dsc and published beside it. They are
// listed in <component>/source/Sources, which a suite's Release lists once any of its
// components has had a source package.

// sourcePoolPath is where a source package's .dsc is published, named as dak names it:
// <source>_<version without epoch>.dsc.
func sourcePoolPath(component, name, version string) string {
	if i := strings.IndexByte(version, ':'); i >= 0 {
		version = version[i+1:]
	}
	return pool.Path(component, name, name+"_"+version+".dsc")
}

// sourceFiles returns the manifest entries of a source package's further files, published
// in the directory of its .dsc at dscPath.
func sourceFiles(dscPath string, parts []deb.SourcePart) []manifest.File {
	dir := path.Dir(dscPath)
	out := make([]manifest.File, len(parts))
	for i, p := range parts {
		out[i] = manifest.File{Path: dir + "/" + p.Name, Size: p.Size, SHA256: p.SHA256}
	}
	return out
}

// completeSources gives each source package of the inputs its further files. Those read
// in this build have them; for one the stat cache vouched for, they are the parent's
// entry of the same .dsc, so an unchanged .dsc is not read again. A .dsc the parent does
// not list is read now.
func completeSources(pkgs *packageList, parent *manifest.Manifest, ins *inputSet) error {
	var byDsc map[string]*manifest.Package
	for i := range pkgs.list {
		p, in := &pkgs.list[i], pkgs.from[i]
		if p.Architecture != "source" || p.Files != nil || in == nil {
			continue
		}
		if in.Src == nil {
			if byDsc == nil {
				byDsc = map[string]*manifest.Package{}
				if parent != nil {
					for j := range parent.Packages {
						if q := &parent.Packages[j]; q.Architecture == "source" {
							byDsc[q.SHA256] = q
						}
					}
				}
			}
			if q := byDsc[p.SHA256]; q != nil {
				dir := path.Dir(p.Path)
				for _, f := range q.Files {
					p.Files = append(p.Files, manifest.File{Path: dir + "/" + path.Base(f.Path), Size: f.Size, SHA256: f.SHA256})
				}
				continue
			}
			if err := in.ReadSource(); err != nil {
				return err
			}
			ins.fresh[in.SHA256] = in
			ins.read++
		}
		p.Files = sourceFiles(p.Path, in.Src.Parts)
	}
	return checkSourceFiles(pkgs, parent)
}

// checkSourceFiles refuses a source package read in this build whose files would give a
// pool path other bytes than another input or the parent gives it: two versions share
// their orig tarball by name, and clients holding an earlier index fetch it by that path.
// Packages the stat cache vouched for were checked when they were read.
func checkSourceFiles(pkgs *packageList, parent *manifest.Manifest) error {
	var paths map[string]string // pool path → digest
	var owner map[string]string // pool path → what publishes it, for the error
	for i := range pkgs.list {
		p, in := &pkgs.list[i], pkgs.from[i]
		if in == nil || in.Src == nil {
			continue
		}
		if paths == nil {
			paths, owner = map[string]string{}, map[string]string{}
			add := func(q *manifest.Package, from string) {
				paths[q.Path], owner[q.Path] = q.SHA256, from
				for _, f := range q.Files {
					paths[f.Path], owner[f.Path] = f.SHA256, from
				}
			}
			if parent != nil {
				for j := range parent.Packages {
					q := &parent.Packages[j]
					add(q, fmt.Sprintf("%s %s (%s), already published in %s/%s", q.Name, q.Version, q.Architecture, q.Suite, q.Component))
				}
			}
			for j := range pkgs.list {
				if from := pkgs.from[j]; from != nil && from.Src == nil {
					add(&pkgs.list[j], from.Path)
				}
			}
		}
		for _, f := range p.Files {
			if sum, ok := paths[f.Path]; ok && sum != f.SHA256 {
				return fmt.Errorf("%w: %s names %s, which %s publishes as %s with other contents; apt clients would get a hash sum mismatch: give the upstream tarball a new version, or use the published one",
					ErrConflict, in.Path, path.Base(f.Path), owner[f.Path], f.Path)
			}
			paths[f.Path], owner[f.Path] = f.SHA256, in.Path
		}
	}
	return nil
}

// sources stages <comp>/source/Sources of the suite s when want (the suite has source
// packages) or the component had a Sources index in the parent, reusing the parent's when
// its package list did not change, as write does.
func (w *indexWriter) sources(s Suite, comp string, prevSums map[string]release.Digests, want bool, si *suiteIndexes) error {
	dist := "dists/" + s.Codename + "/"
	rel := comp + "/source/Sources"
	key := indexKey{s.Codename, comp, "source"}
	return w.write(dist, rel, key, prevSums, want, si, func() ([][]byte, error) {
		return sourceStanzas(dist+rel, w.members[key], w.ins, w.par)
	})
}

// optionalIndexes reports whether a suite has source packages and installer packages:
// then every component has a Sources index, and every component and architecture an
// installer index, so a mirror asking for all of them finds them, empty or not.
func optionalIndexes(suite string, members map[indexKey][]*manifest.Package) (sources, installer bool) {
	for k, v := range members {
		if k.suite == suite && len(v) > 0 {
			sources = sources || k.arch == "source"
			installer = installer || strings.HasSuffix(k.component, installerDir)
		}
	}
	return sources, installer
}

// sourceStanzas returns the Sources stanzas of an index's members: fresh from the .dsc
// read in this build, reused from the parent's Sources indexes in the tree for the
// others, and read again from the .dsc when the tree does not have them.
func sourceStanzas(indexPath string, members []*manifest.Package, ins *inputSet, par *parent) ([][]byte, error) {
	out := make([][]byte, 0, len(members))
	var prev map[string][]byte
	for _, p := range members {
		if in := ins.fresh[p.SHA256]; in != nil && in.Src != nil {
			out = append(out, sourceStanza(in.Src, p.Path))
			continue
		}
		if prev == nil {
			prev = par.sourceStanzas(indexPath)
		}
		if st := prev[p.Path+" "+p.SHA256]; st != nil {
			out = append(out, st)
			continue
		}
		if st := par.sourceStanzaElsewhere(p); st != nil {
			out = append(out, st)
			continue
		}
		in := ins.forSum(p.SHA256)
		if in == nil {
			return nil, fmt.Errorf("no stanza for source package %s %s: it is not among the inputs, and the parent's Sources indexes in the tree do not list it", p.Name, p.Version)
		}
		if err := in.ReadSource(); err != nil {
			return nil, err
		}
		out = append(out, sourceStanza(in.Src, p.Path))
	}
	return out, nil
}

// sourceStanza is the stanza of s published with its .dsc at dscPath.
func sourceStanza(s *deb.Source, dscPath string) []byte {
	c := *s
	c.Filename = path.Base(dscPath)
	return c.Stanza(path.Dir(dscPath))
}

// sourceStanzas returns the stanzas of the parent's Sources index at indexPath, keyed by
// the .dsc's pool path and SHA-256 ("path sum"). An index it cannot find has none.
func (p *parent) sourceStanzas(indexPath string) map[string][]byte {
	out := map[string][]byte{}
	data, _ := parentPlain(p.dirs, indexPath, p.plains[indexPath])
	for len(data) > 0 {
		end := bytes.Index(data, []byte("\n\n"))
		var st []byte
		if end < 0 {
			st, data = data, nil
		} else {
			st, data = data[:end+1], data[end+2:]
		}
		if k := sourceStanzaKey(st); k != "" {
			out[k] = st
		}
	}
	return out
}

// sourceStanzaKey returns "path sum" of the .dsc a Sources stanza lists: Directory, and
// the Checksums-Sha256 line of the file ending in .dsc.
func sourceStanzaKey(st []byte) string {
	dir := stanzaField(st, "\nDirectory: ")
	i := bytes.Index(st, []byte("\nChecksums-Sha256:\n"))
	if dir == nil || i < 0 {
		return ""
	}
	for _, line := range strings.Split(string(st[i+len("\nChecksums-Sha256:\n"):]), "\n") {
		if !strings.HasPrefix(line, " ") {
			break
		}
		f := strings.Fields(line)
		if len(f) == 3 && strings.HasSuffix(f[2], ".dsc") {
			return string(dir) + "/" + f[2] + " " + f[0]
		}
	}
	return ""
}

// sourceStanzaElsewhere returns the stanza of a source package from any of the parent's
// Sources indexes in the tree (a package copied between suites or components, whose
// Directory is then rewritten), or nil.
func (p *parent) sourceStanzaElsewhere(pkg *manifest.Package) []byte {
	if p.m == nil {
		return nil
	}
	name := path.Base(pkg.Path)
	for _, ip := range slices.Sorted(maps.Keys(p.plains)) {
		if path.Base(ip) != "Sources" {
			continue
		}
		for k, st := range p.sourceStanzas(ip) {
			if strings.HasSuffix(k, "/"+name+" "+pkg.SHA256) {
				dir := stanzaField(st, "\nDirectory: ")
				return bytes.Replace(st, []byte("\nDirectory: "+string(dir)+"\n"), []byte("\nDirectory: "+path.Dir(pkg.Path)+"\n"), 1)
			}
		}
	}
	return nil
}
