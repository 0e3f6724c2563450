package gen

import (
	"cmp"
	"fmt"
	"hash/maphash"
	"math/bits"
	"runtime"
	"slices"
	"strings"

	"github.com/armor-apt/armor/debian/pool"
	"github.com/armor-apt/armor/gen/inputs"
	"github.com/armor-apt/armor/manifest"
	"golang.org/x/sync/errgroup"
)

// packageList is a release's packages in the manifest's canonical order, each with the
// input it was found in.
type packageList struct {
	list []manifest.Package
	from []*inputs.Input // from[i] is the input of list[i]
}

// claim is one input in one suite's component, in the order of the configuration.
type claim struct {
	pkg   manifest.Package
	in    *inputs.Input
	order int
}

// resolvePackages turns the inputs of each suite's components into the package list.
// The same file claimed twice is listed once; two different files claiming one package
// identity, or one pool path, are an error wrapping ErrConflict.
//
// It holds every input of a large repository at once, so it checks for conflicts on
// sorted slices rather than in maps keyed by path or identity: at 100,000 packages the
// maps cost more than the rest of an incremental build's bookkeeping. The claims are made
// on all cores, and pool paths checked beside the sort: this runs while nothing else
// does.
func resolvePackages(groups []inputGroup, ins *inputSet) (packageList, error) {
	claims, paths, err := claimsOf(groups, ins)
	if err != nil {
		return packageList{}, err
	}
	// The same file claimed twice shares its pool path and its digest, so the pool paths
	// can be checked before the duplicates are dropped.
	pathErr := make(chan error, 1)
	go func() { pathErr <- checkPoolPaths(paths) }()
	// Canonical order, ties in configuration order: one identity claimed twice sits side
	// by side, the first claim first.
	slices.SortFunc(claims, func(x, y claim) int {
		return cmp.Or(manifest.ComparePackages(&x.pkg, &y.pkg), cmp.Compare(x.order, y.order))
	})
	pkgs := packageList{list: make([]manifest.Package, 0, len(claims)), from: make([]*inputs.Input, 0, len(claims))}
	for i := range claims {
		c := &claims[i]
		if i > 0 && c.pkg.Key() == claims[i-1].pkg.Key() {
			first := &claims[i-1]
			if first.in.SHA256 == c.in.SHA256 {
				continue // the same file twice: de-duplicated
			}
			<-pathErr
			p := c.pkg
			return packageList{}, fmt.Errorf("%w: %s and %s are both %s %s (%s) in %s/%s but differ; remove one",
				ErrConflict, first.in.Path, c.in.Path, p.Name, p.Version, p.Architecture, p.Suite, p.Component)
		}
		pkgs.list, pkgs.from = append(pkgs.list, c.pkg), append(pkgs.from, c.in)
	}
	if err := <-pathErr; err != nil {
		return packageList{}, err
	}
	return pkgs, nil
}

// pathClaim is what checkPoolPaths needs of a claim.
type pathClaim struct {
	path, sha256 string // the pool path and the file's digest
	in           *inputs.Input
}

// claimsOf returns the claims of every group, in configuration order, and the pool path
// of each (paths[c.order] is c's). An input of an architecture its suite does not list is
// an error. Claims are made in runs of files on all cores; the first error in
// configuration order is the one returned.
func claimsOf(groups []inputGroup, ins *inputSet) ([]claim, []pathClaim, error) {
	type run struct {
		g     *inputGroup
		files []inputs.File
		at    int // the order of its first claim
	}
	const runSize = 8192
	var runs []run
	n := 0
	for gi := range groups {
		g := &groups[gi]
		for lo := 0; lo < len(g.files); lo += runSize {
			files := g.files[lo:min(lo+runSize, len(g.files))]
			runs = append(runs, run{g, files, n})
			n += len(files)
		}
	}
	claims, paths := make([]claim, n), make([]pathClaim, n)
	errs := make([]error, len(runs))
	var g errgroup.Group
	g.SetLimit(runtime.GOMAXPROCS(0))
	for ri, r := range runs {
		g.Go(func() error {
			// r.files and ins.all are both sorted by path.
			j, _ := slices.BinarySearchFunc(ins.all, r.files[0].Path, func(in *inputs.Input, p string) int { return strings.Compare(in.Path, p) })
			for k, f := range r.files {
				for ins.all[j].Path != f.Path {
					j++
				}
				in := ins.all[j]
				if in.Architecture != "all" && in.Architecture != "source" && !slices.Contains(r.g.suite.Architectures, in.Architecture) {
					errs[ri] = fmt.Errorf("%s: field Architecture: %q is not one of suite %s's architectures (%s); add it to the suite or remove the file",
						in.Path, in.Architecture, r.g.suite.Codename, strings.Join(r.g.suite.Architectures, ", "))
					return nil
				}
				c := &claims[r.at+k]
				*c = claim{pkg: manifest.Package{
					Suite: r.g.suite.Codename, Component: r.g.comp,
					Name: in.Name, Version: in.Version, Architecture: in.Architecture,
					Path: poolPath(r.g.comp, in), Size: in.Size, SHA256: in.SHA256,
				}, in: in, order: r.at + k}
				if in.Src != nil {
					c.pkg.Files = sourceFiles(c.pkg.Path, in.Src.Parts)
				}
				paths[r.at+k] = pathClaim{c.pkg.Path, c.pkg.SHA256, in}
			}
			return nil
		})
	}
	g.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, nil, err
		}
	}
	return claims, paths, nil
}

// checkPoolPaths makes sure one pool path is one file: a path is shared by suites, and
// versions differing only in their epoch share a file name. claims are in configuration
// order; of two files at one path, the error names the first claimed first.
//
// Sorting 64-bit hashes of the paths finds the candidates without sorting the paths.
// Each word is a hash in its high bits and an index into claims in its low bits, so the
// sort is of plain integers; paths whose hashes agree in the high bits are compared.
func checkPoolPaths(claims []pathClaim) error {
	shift := bits.Len(uint(len(claims)))
	mask := uint64(1)<<shift - 1
	seed := maphash.MakeSeed()
	hashes := make([]uint64, len(claims))
	for i := range claims {
		hashes[i] = maphash.String(seed, claims[i].path)<<shift | uint64(i)
	}
	slices.Sort(hashes)
	for lo := 0; lo < len(hashes); {
		hi := lo + 1
		for hi < len(hashes) && hashes[hi]>>shift == hashes[lo]>>shift {
			hi++
		}
		for a := lo; a < hi; a++ { // a run is one path, or a rare collision
			for b := a + 1; b < hi; b++ {
				i, j := hashes[a]&mask, hashes[b]&mask // i < j: the sort keeps index order
				x, y := &claims[i], &claims[j]
				if x.path != y.path || x.sha256 == y.sha256 {
					continue
				}
				return fmt.Errorf("%w: %s and %s would both be published as %s but differ; remove one",
					ErrConflict, x.in.Path, y.in.Path, x.path)
			}
		}
		lo = hi
	}
	return nil
}

// byKey is manifest.CompareKeys for searching a list of packages.
func byKey(a manifest.Package, b *manifest.Package) int { return manifest.CompareKeys(&a, b) }

// poolPath is where a package is published: pool/<component>/<prefix>/<source>/<file>.
func poolPath(component string, in *inputs.Input) string {
	if in.Architecture == "source" {
		return sourcePoolPath(component, in.Name, in.Version)
	}
	name := pool.Filename(in.Name, in.Version, in.Architecture)
	if ext := inputs.Ext(in.Path); ext != ".deb" {
		name = strings.TrimSuffix(name, ".deb") + ext
	}
	return pool.Path(component, in.Source, name)
}
