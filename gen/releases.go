package gen

import (
	"context"
	"crypto"
	"fmt"
	"time"

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

// releaseSpec is what the Release files of a build say, and who signs them.
type releaseSpec struct {
	origin, label, description string
	suites                     []Suite
	date                       time.Time
	keys                       []*sign.Key // Options.Key, then Options.Also
	hash                       crypto.Hash
	resign                     bool      // sign a suite whose indexes did not change
	now                        time.Time // the wall clock: a kept Release that expired by now is signed afresh
}

func (o *Options) releaseSpec() releaseSpec {
	return releaseSpec{o.Origin, o.Label, o.Description, o.Suites, o.Date, append([]*sign.Key{o.Key}, o.Also...), o.Hash, o.Resign, o.now()}
}

// signReleases writes and signs each suite's Release, InRelease and Release.gpg, given
// what writeIndexes made of its indexes, in the order of sp.suites.
func signReleases(ctx context.Context, sp releaseSpec, par *parent, suites []suiteIndexes, tw *tree.Writer) (releasesMade, error) {
	var out releasesMade
	for i, s := range sp.suites {
		files, signed, err := signRelease(ctx, sp, s, suites[i], par.files, tw)
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
// are (unless sp.resign), and signed is false. The signatures are made at the
// Release's Date, so a build repeated with the same inputs signs the same bytes.
func signRelease(ctx context.Context, sp releaseSpec, s Suite, idx suiteIndexes, prevFiles map[string]manifest.File, tw *tree.Writer) (files []manifest.File, signed bool, err error) {
	dist := "dists/" + s.Codename + "/"
	h := release.Header{
		Origin: sp.origin, Label: sp.label, Suite: s.Suite, Codename: s.Codename,
		Description: s.Description, Date: sp.date,
		Architectures: s.Architectures, Components: s.Components,
		SignedBy:     fingerprints(sp.keys),
		NotAutomatic: s.NotAutomatic, ButAutomaticUpgrades: s.ButAutomaticUpgrades,
	}
	if h.Description == "" {
		h.Description = sp.description
	}
	if s.ValidFor > 0 {
		h.ValidUntil = sp.date.Add(s.ValidFor)
	}
	text := release.Make(h, idx.sums)
	if !idx.changed && !sp.resign {
		if kept, ok := keptRelease(tw.Root(), dist, text, prevFiles, sp.now); ok {
			return kept, false, nil
		}
	}
	if err := waitForDate(ctx, sp.date); err != nil {
		return nil, false, err
	}
	inRelease, detached, err := sign.SignRelease(ctx, sp.keys, text, sp.hash, sp.date)
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
// and its Release says what text does but for the dates, and has not expired (its
// Valid-Until has not passed: an expired one is signed afresh).
func keptRelease(tree, dist string, text []byte, prevFiles map[string]manifest.File, now time.Time) ([]manifest.File, bool) {
	old, ok := previousFile(tree, dist+"Release", prevFiles)
	if !ok || !release.SameButDates(old, text) || expired(old, now) {
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

// fingerprints are the keys that sign, for Release's Signed-By.
func fingerprints(keys []*sign.Key) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = k.Fingerprint()
	}
	return out
}
