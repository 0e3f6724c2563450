package gen

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/armor-apt/armor/gen/pool"
	"github.com/armor-apt/armor/gen/release"
	"github.com/armor-apt/armor/manifest"
)

// writeRelease writes and signs dists/<codename>/Release, InRelease and Release.gpg,
// unless no index of the suite changed and the Release header is the same as before, in
// which case the previous signed files are kept as they are.
func (b *builder) writeRelease(s Suite, dist string, sums map[string]release.Digests, changed bool, prevFiles map[string]manifest.File) error {
	desc := s.Description
	if desc == "" {
		desc = b.o.Description
	}
	info := release.Header{
		Origin: b.o.Origin, Label: b.o.Label, Suite: s.Suite, Codename: s.Codename,
		Description: desc, Date: b.o.Date,
		Architectures: s.Architectures, Components: s.Components,
		SignedBy: []string{b.o.Key.Fingerprint()},
	}
	if s.ValidFor > 0 {
		info.ValidUntil = b.o.Date.Add(s.ValidFor)
	}
	text := release.Make(info, sums)
	names := []string{"Release", "Release.gpg", "InRelease"}
	if !changed && !b.o.Resign {
		if old, ok := b.previousFile(dist+"Release", prevFiles); ok && release.SameButDates(old, text) {
			var keep []manifest.File
			for _, n := range names {
				if f, ok := prevFiles[dist+n]; ok && b.inTree(f) {
					keep = append(keep, f)
				}
			}
			if len(keep) == len(names) {
				b.files = append(b.files, keep...)
				return nil
			}
		}
	}
	inRelease, detached, err := b.o.Key.SignRelease(text, b.o.Hash)
	if err != nil {
		return fmt.Errorf("sign %sRelease: %w", dist, err)
	}
	for i, data := range [][]byte{text, detached, inRelease} {
		p := dist + names[i]
		if err := b.tw.WriteFile(p, data); err != nil {
			return err
		}
		b.files = append(b.files, manifest.File{Path: p, Size: int64(len(data)), SHA256: sha256Hex(data)})
	}
	b.wrote = true
	b.stats.SuitesSigned++
	return nil
}

// previousFile returns the tree's copy of a file of the previous release, if it still
// has the content the previous manifest lists.
func (b *builder) previousFile(rel string, prevFiles map[string]manifest.File) ([]byte, bool) {
	f, ok := prevFiles[rel]
	if !ok {
		return nil, false
	}
	data, err := os.ReadFile(filepath.Join(b.o.TreeDir, filepath.FromSlash(rel)))
	if err != nil || int64(len(data)) != f.Size || sha256Hex(data) != f.SHA256 {
		return nil, false
	}
	return data, true
}

func (b *builder) inTree(f manifest.File) bool {
	st, err := os.Stat(filepath.Join(b.o.TreeDir, filepath.FromSlash(f.Path)))
	return err == nil && st.Size() == f.Size
}

// poolPath is where a package is published: pool/<component>/<prefix>/<source>/<file>.
func poolPath(component string, in *input) string {
	return pool.Path(component, in.Source, pool.Filename(in.Name, in.Version, in.Architecture))
}
