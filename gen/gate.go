package gen

import (
	"context"
	"fmt"
	"sync"

	"github.com/armor-apt/armor/debian/deb"
	"github.com/armor-apt/armor/manifest"
)

// GateInput is what Options.Gate judges: the release's package list, known before
// anything of it is written, and its parent's.
type GateInput struct {
	Parent   *manifest.Manifest // nil for a first build
	Packages []manifest.Package // the release's, in canonical order
	// Stanza returns the control stanza of a binary package of the release or of the
	// parent: from the input read in this build, else from the parent's indexes. The
	// bytes are valid only until Options.Gate returns: copy what is kept. It may be
	// called from several goroutines at once.
	Stanza func(p *manifest.Package) ([]byte, error)
}

// runGate calls gate (Options.Gate), if set, with the release's packages, unless they
// are the parent's unchanged.
func runGate(ctx context.Context, gate func(context.Context, *GateInput) error, par *parent, pl plan, ins *inputSet) error {
	if gate == nil || par.m != nil && len(pl.diff.changed) == 0 && pl.diff.removed == 0 {
		return nil
	}
	pkgs := pl.pkgs.list
	// The parent's stanzas, read when first needed (a warm check reads none). They point
	// into the parent's indexes, which the writer splices in place after the check: the
	// check copies what it keeps, and the map is dropped with this function.
	var parents map[string][]byte
	var loadOnce sync.Once
	stanza := func(p *manifest.Package) ([]byte, error) {
		if in := ins.fresh[p.SHA256]; in != nil && in.Pkg != nil {
			return in.Pkg.Stanza(p.Path), nil
		}
		if par.m != nil {
			loadOnce.Do(func() { parents = par.loadIndexes() })
		}
		if st := stanzaOf(parents, p); st != nil {
			return st, nil
		}
		if in := ins.forSum(p.SHA256); in != nil {
			pkg, err := deb.ReadFile(in.Path)
			if err != nil {
				return nil, err
			}
			return pkg.Stanza(p.Path), nil
		}
		return nil, par.explain(fmt.Errorf("no stanza for %s %s (%s): it is not among the inputs, and the parent's indexes do not list it", p.Name, p.Version, p.Architecture))
	}
	return gate(ctx, &GateInput{Parent: par.m, Packages: pkgs, Stanza: stanza})
}
