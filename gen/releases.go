package gen

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/armor-apt/armor/debian/release"
	"github.com/armor-apt/armor/debian/sign"
	"github.com/armor-apt/armor/gen/tree"
	"github.com/armor-apt/armor/manifest"
)

// releasesMade is what signReleases made.
type releasesMade struct {
	files  []manifest.File // every suite's Release, Release.gpg and InRelease, kept or new
	signed int             // suites signed afresh
}

// signReleases writes and signs each suite's Release, InRelease and Release.gpg, given
// what writeIndexes made of its indexes, in the order of Options.Suites.
func signReleases(ctx context.Context, o *Options, par *parent, suites []suiteIndexes, tw *tree.Writer) (releasesMade, error) {
	var out releasesMade
	for i, s := range o.Suites {
		files, signed, err := signRelease(ctx, o, s, suites[i], par.files, tw)
		if err != nil {
			return out, err
		}
		out.files = append(out.files, files...)
		if signed {
			out.signed++
		}
	}
	return out, nil
}

var releaseNames = []string{"Release", "Release.gpg", "InRelease"}

// signRelease stages dists/<codename>/Release, Release.gpg and InRelease, signed, and
// returns their manifest entries. When no index of the suite changed and the Release is
// the same as the parent's but for its dates, the parent's signed files are kept as they
// are (unless Options.Resign), and signed is false. The signatures are made at the
// Release's Date, so a build repeated with the same inputs signs the same bytes.
func signRelease(ctx context.Context, o *Options, s Suite, idx suiteIndexes, prevFiles map[string]manifest.File, tw *tree.Writer) (files []manifest.File, signed bool, err error) {
	dist := "dists/" + s.Codename + "/"
	h := release.Header{
		Origin: o.Origin, Label: o.Label, Suite: s.Suite, Codename: s.Codename,
		Description: s.Description, Date: o.Date,
		Architectures: s.Architectures, Components: s.Components,
		SignedBy:     o.fingerprints(),
		NotAutomatic: s.NotAutomatic, ButAutomaticUpgrades: s.ButAutomaticUpgrades,
	}
	if h.Description == "" {
		h.Description = o.Description
	}
	if s.ValidFor > 0 {
		h.ValidUntil = o.Date.Add(s.ValidFor)
	}
	text := release.Make(h, idx.sums)
	if !idx.changed && !o.Resign {
		if kept, ok := keptRelease(o.TreeDir, dist, text, prevFiles); ok {
			return kept, false, nil
		}
	}
	inRelease, detached, err := sign.SignRelease(ctx, append([]*sign.Key{o.Key}, o.Also...), text, o.Hash, o.Date)
	if err != nil {
		return nil, false, fmt.Errorf("sign %sRelease: %w", dist, err)
	}
	for i, data := range [][]byte{text, detached, inRelease} {
		p := dist + releaseNames[i]
		if err := tw.WriteFile(p, data); err != nil {
			return nil, false, err
		}
		files = append(files, manifest.File{Path: p, Size: int64(len(data)), SHA256: sha256Hex(data)})
	}
	return files, true, nil
}

// keptRelease returns the parent's signed files of a suite, if the tree still holds them
// and its Release says what text does but for the dates.
func keptRelease(tree, dist string, text []byte, prevFiles map[string]manifest.File) ([]manifest.File, bool) {
	old, ok := previousFile(tree, dist+"Release", prevFiles)
	if !ok || !release.SameButDates(old, text) {
		return nil, false
	}
	var keep []manifest.File
	for _, n := range releaseNames {
		f, ok := prevFiles[dist+n]
		if !ok || !inTree(tree, f) {
			return nil, false
		}
		keep = append(keep, f)
	}
	return keep, true
}

// previousFile returns the tree's copy of a file of the parent, if it still has the
// content the parent's manifest lists.
func previousFile(tree, rel string, prevFiles map[string]manifest.File) ([]byte, bool) {
	f, ok := prevFiles[rel]
	if !ok {
		return nil, false
	}
	data, err := os.ReadFile(filepath.Join(tree, filepath.FromSlash(rel)))
	if err != nil || int64(len(data)) != f.Size || sha256Hex(data) != f.SHA256 {
		return nil, false
	}
	return data, true
}

func inTree(tree string, f manifest.File) bool {
	st, err := os.Stat(filepath.Join(tree, filepath.FromSlash(f.Path)))
	return err == nil && st.Size() == f.Size
}

// fingerprints are the keys that sign, for Release's Signed-By.
func (o *Options) fingerprints() []string {
	out := []string{o.Key.Fingerprint()}
	for _, k := range o.Also {
		out = append(out, k.Fingerprint())
	}
	return out
}
