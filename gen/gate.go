package gen

import (
	"context"
	"fmt"

	"github.com/armor-apt/armor/debian/deb"
	"github.com/armor-apt/armor/manifest"
)

// GateInput is what Options.Gate judges: the release's package list, known before
// anything of it is written, and its parent's.
type GateInput struct {
	Parent   *manifest.Manifest // nil for a first build
	Packages []manifest.Package // the release's, in canonical order
	// Stanza returns the control stanza of a binary package of the release or of the
	// parent: from the input read in this build, else from the parent's indexes.
	Stanza func(p *manifest.Package) ([]byte, error)
}

// runGate calls Options.Gate, if set, with the release's packages.
func runGate(ctx context.Context, o *Options, par *parent, pkgs []manifest.Package, ins *inputSet) error {
	if o.Gate == nil {
		return nil
	}
	stanza := func(p *manifest.Package) ([]byte, error) {
		if in := ins.fresh[p.SHA256]; in != nil && in.Pkg != nil {
			return in.Pkg.Stanza(p.Path), nil
		}
		if st := par.stanzaElsewhere(p); st != nil {
			return st, nil
		}
		if in := ins.forSum(p.SHA256); in != nil {
			pkg, err := deb.ReadFile(in.Path)
			if err != nil {
				return nil, err
			}
			return pkg.Stanza(p.Path), nil
		}
		return nil, fmt.Errorf("no stanza for %s %s (%s): it is not among the inputs, and the parent's indexes do not list it", p.Name, p.Version, p.Architecture)
	}
	return o.Gate(ctx, &GateInput{Parent: par.m, Packages: pkgs, Stanza: stanza})
}
