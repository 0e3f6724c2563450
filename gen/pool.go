package gen

import (
	"fmt"
	"os"
	"path"
	"path/filepath"

	"github.com/armor-apt/armor/gen/tree"
	"github.com/armor-apt/armor/manifest"
	"golang.org/x/sync/errgroup"
)

// poolSpec is how stagePool stages the pool: verify (Options.Verify) checks the tree's
// files against their digests, link (Options.LinkPool) links where it would copy.
type poolSpec struct{ verify, link bool }

func (o *Options) poolSpec() poolSpec { return poolSpec{o.Verify, o.LinkPool} }

// stagePool stages in the tree every pool file of pkgs it does not hold yet, copied
// from its input or linked to it (stageFile). A file the parent published under the same path with
// the same digest is trusted to be in place (--verify rehashes it); anything else is
// staged, so a replaced input of the same size is never mistaken for the old one. Of pl's
// packages only those the parent does not list as they are need staging.
func stagePool(tw *tree.Writer, how poolSpec, parent *manifest.Manifest, pl plan, ins *inputSet) error {
	pkgs, changed := pl.pkgs.list, pl.diff.changed
	todo := pkgs
	if _, err := os.Stat(filepath.Join(tw.Root(), "pool")); parent != nil && err == nil && !how.verify {
		// As indexes are: the previous build wrote and renamed the others in place. A tree
		// removed whole is rebuilt whole; --verify repairs parts.
		todo = make([]manifest.Package, len(changed))
		for i, j := range changed {
			todo[i] = pkgs[j]
		}
	}
	// The files are staged in parallel: a first build of a large repository is mostly
	// file-system round trips, which overlap well.
	g := new(errgroup.Group)
	g.SetLimit(8)
	staged := make(map[string]bool, len(todo))
	var published map[string]string // the parent's pool files: path → digest
	for _, p := range todo {
		if staged[p.Path] {
			continue // the same file in two suites
		}
		staged[p.Path] = true
		src := ins.forSum(p.SHA256)
		if src == nil {
			// A package of the parent, or copied from one of its suites: its file is in
			// the store, and a runner need not have it.
			if published == nil {
				published = poolDigests(parent)
			}
			if published[p.Path] == p.SHA256 {
				continue
			}
			g.Wait() // the copies started stage nothing after the tree writer's Abort
			return fmt.Errorf("no input file for %s %s (%s)", p.Name, p.Version, p.Architecture)
		}
		for _, f := range p.Files {
			if !staged[f.Path] {
				staged[f.Path] = true
				local := filepath.Join(filepath.Dir(src.Path), path.Base(f.Path))
				g.Go(func() error { return stageFile(tw, how, f.Path, f.SHA256, local) })
			}
		}
		if src.Path == filepath.Join(tw.Root(), filepath.FromSlash(p.Path)) {
			continue // already in place (a rebase adds the tree's own pool files)
		}
		g.Go(func() error { return stageFile(tw, how, p.Path, p.SHA256, src.Path) })
	}
	return g.Wait()
}

// stageFile stages the local file src at the tree path p, copied, or with how.link linked
// where the file system allows (tree.Writer.LinkFile), unless it is there already (with
// --verify, where the tree's file is checked against sum).
func stageFile(tw *tree.Writer, how poolSpec, p, sum, src string) error {
	dst := filepath.Join(tw.Root(), filepath.FromSlash(p))
	if src == dst {
		return nil
	}
	if how.verify {
		if got, err := fileSHA256(dst); err == nil && got == sum {
			return nil
		}
	}
	if how.link {
		return tw.LinkFile(p, src)
	}
	return tw.CopyFile(p, src)
}

// poolDigests maps the parent's pool paths to their digests.
func poolDigests(parent *manifest.Manifest) map[string]string {
	out := map[string]string{}
	if parent != nil {
		for _, p := range parent.Packages {
			out[p.Path] = p.SHA256
			for _, f := range p.Files {
				out[f.Path] = f.SHA256
			}
		}
	}
	return out
}
