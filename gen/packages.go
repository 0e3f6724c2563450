package gen

import (
	"cmp"
	"fmt"
	"hash/maphash"
	"math/bits"
	"slices"
	"strings"

	"github.com/armor-apt/armor/gen/pool"
	"github.com/armor-apt/armor/manifest"
)

// packageList is a release's packages in the manifest's canonical order, each with the
// input it was found in.
type packageList struct {
	list []manifest.Package
	from []*input // from[i] is the input of list[i]
}

// claim is one input in one suite's component, in the order of the configuration.
type claim struct {
	pkg   manifest.Package
	in    *input
	order int
}

// resolvePackages turns the inputs of each suite's components into the package list.
// The same file claimed twice is listed once; two different files claiming one package
// identity, or one pool path, are an error wrapping ErrConflict.
//
// It holds every input of a large repository at once, so it checks for conflicts on
// sorted slices rather than in maps keyed by path or identity: at 100,000 packages the
// maps cost more than the rest of an incremental build's bookkeeping.
func resolvePackages(groups []inputGroup, ins *inputSet) (packageList, error) {
	claims, err := claimsOf(groups, ins)
	if err != nil {
		return packageList{}, err
	}
	// Canonical order, ties in configuration order: one identity claimed twice sits side
	// by side, the first claim first.
	slices.SortFunc(claims, func(x, y claim) int {
		return cmp.Or(comparePackages(x.pkg, y.pkg), cmp.Compare(x.order, y.order))
	})
	kept := claims[:0]
	for i, c := range claims {
		if i > 0 && c.pkg.Key() == claims[i-1].pkg.Key() {
			first := claims[i-1]
			if first.in.SHA256 == c.in.SHA256 {
				continue // the same file twice: de-duplicated
			}
			p := c.pkg
			return packageList{}, fmt.Errorf("%w: %s and %s are both %s %s (%s) in %s/%s but differ; remove one",
				ErrConflict, first.in.Path, c.in.Path, p.Name, p.Version, p.Architecture, p.Suite, p.Component)
		}
		kept = append(kept, c)
	}
	if err := checkPoolPaths(kept); err != nil {
		return packageList{}, err
	}
	pkgs := packageList{list: make([]manifest.Package, len(kept)), from: make([]*input, len(kept))}
	for i, c := range kept {
		pkgs.list[i], pkgs.from[i] = c.pkg, c.in
	}
	return pkgs, nil
}

// claimsOf returns the claims of every group, in configuration order. An input of an
// architecture its suite does not list is an error.
func claimsOf(groups []inputGroup, ins *inputSet) ([]claim, error) {
	n := 0
	for _, g := range groups {
		n += len(g.files)
	}
	claims := make([]claim, 0, n)
	for _, g := range groups {
		j := 0 // g.files and ins.all are both sorted by path
		for _, f := range g.files {
			for ins.all[j].Path != f.path {
				j++
			}
			in := ins.all[j]
			if in.Architecture != "all" && in.Architecture != "source" && !slices.Contains(g.suite.Architectures, in.Architecture) {
				return nil, fmt.Errorf("%s: field Architecture: %q is not one of suite %s's architectures (%s); add it to the suite or remove the file",
					in.Path, in.Architecture, g.suite.Codename, strings.Join(g.suite.Architectures, ", "))
			}
			pkg := manifest.Package{
				Suite: g.suite.Codename, Component: g.comp,
				Name: in.Name, Version: in.Version, Architecture: in.Architecture,
				Path: poolPath(g.comp, in), Size: in.Size, SHA256: in.SHA256,
			}
			if in.src != nil {
				pkg.Files = sourceFiles(pkg.Path, in.src.Parts)
			}
			claims = append(claims, claim{pkg: pkg, in: in, order: len(claims)})
		}
	}
	return claims, nil
}

// checkPoolPaths makes sure one pool path is one file: a path is shared by suites, and
// versions differing only in their epoch share a file name.
//
// Sorting 64-bit hashes of the paths finds the candidates without sorting the paths.
// Each word is a hash in its high bits and an index into kept in its low bits, so the
// sort is of plain integers; paths whose hashes agree in the high bits are compared.
func checkPoolPaths(kept []claim) error {
	shift := bits.Len(uint(len(kept)))
	mask := uint64(1)<<shift - 1
	seed := maphash.MakeSeed()
	hashes := make([]uint64, len(kept))
	for i, c := range kept {
		hashes[i] = maphash.String(seed, c.pkg.Path)<<shift | uint64(i)
	}
	slices.Sort(hashes)
	for lo := 0; lo < len(hashes); {
		hi := lo + 1
		for hi < len(hashes) && hashes[hi]>>shift == hashes[lo]>>shift {
			hi++
		}
		for a := lo; a < hi; a++ { // a run is one path, or a rare collision
			for b := a + 1; b < hi; b++ {
				x, y := kept[hashes[a]&mask], kept[hashes[b]&mask]
				if x.pkg.Path != y.pkg.Path || x.pkg.SHA256 == y.pkg.SHA256 {
					continue
				}
				if y.order < x.order {
					x, y = y, x
				}
				return fmt.Errorf("%w: %s and %s would both be published as %s but differ; remove one",
					ErrConflict, x.in.Path, y.in.Path, x.pkg.Path)
			}
		}
		lo = hi
	}
	return nil
}

// comparePackages is the manifest's canonical order of packages.
func comparePackages(a, b manifest.Package) int {
	return cmp.Or(comparePackageKeys(a, b), strings.Compare(a.Path, b.Path))
}

func comparePackageKeys(a, b manifest.Package) int {
	return cmp.Or(
		strings.Compare(a.Suite, b.Suite),
		strings.Compare(a.Component, b.Component),
		strings.Compare(a.Name, b.Name),
		strings.Compare(a.Version, b.Version),
		strings.Compare(a.Architecture, b.Architecture),
	)
}

// poolPath is where a package is published: pool/<component>/<prefix>/<source>/<file>.
func poolPath(component string, in *input) string {
	if in.Architecture == "source" {
		return sourcePoolPath(component, in.Name, in.Version)
	}
	name := pool.Filename(in.Name, in.Version, in.Architecture)
	if ext := packageExt(in.Path); ext != ".deb" {
		name = strings.TrimSuffix(name, ".deb") + ext
	}
	return pool.Path(component, in.Source, name)
}
