package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/armor-apt/armor/cli/config"
	"github.com/armor-apt/armor/gen"
	"github.com/armor-apt/armor/manifest"
	"github.com/armor-apt/armor/publish"
)

// maxRebases bounds how often push --rebase applies its change again: each time, another
// push won the race meanwhile.
const maxRebases = 5

// rebase builds the local release's change again on controld's active release: the
// packages it added since its parent (from the local tree's pool files, or as they are
// when the active release publishes them already) and the ones it removed. The inputs of
// armor.toml are applied too, as in any build.
func rebase(ctx context.Context, cfgPath string, o pushOptions) (*buildResult, error) {
	cfg, err := config.Load(cfgPath)
	if err != nil {
		return nil, err
	}
	built, err := manifest.Load(cfg.Resolve(cfg.Output.Manifest))
	if err != nil {
		return nil, err
	}
	url := o.Controld.url(cfg)
	c, err := controlClient(cfg, url, o.Controld.CACert)
	if err != nil {
		return nil, err
	}
	s := o.Store
	if s == nil {
		if s, err = publish.OpenStore(ctx, cfg.Remote()); err != nil {
			return nil, err
		}
	}
	repo := cfg.Repository.Name
	var parent *manifest.Manifest
	if built.Parent != "" {
		if parent, err = publish.RecordedManifest(ctx, c, s, repo, built.Parent); err != nil {
			return nil, fmt.Errorf("rebase: the release's parent: %w", err)
		}
	}
	active, err := publish.ActiveManifest(ctx, c, s, repo)
	if err != nil {
		return nil, fmt.Errorf("rebase: %w", err)
	}
	added, removed := gen.Replay(parent, built)
	b := buildOptions{Parent: active, Store: s, Controld: o.Controld, Rebase: true}
	tree := cfg.Resolve(cfg.Output.Tree)
	// The active release's packages by identity: the change is applied against them.
	onActive := map[manifest.Key]string{} // → digest
	if active != nil {
		for _, p := range active.Packages {
			onActive[p.Key()] = p.SHA256
		}
	}
	for _, p := range added {
		f := filepath.Join(tree, filepath.FromSlash(p.Path))
		if sum, ok := onActive[p.Key()]; ok && sum == p.SHA256 {
			b.Reference = append(b.Reference, p) // there already: the change is its phasing
		} else if st, err := os.Stat(f); err == nil && st.Size() == p.Size {
			b.Add = append(b.Add, gen.Addition{Suite: p.Suite, Component: p.Component, Path: f})
		} else {
			b.Reference = append(b.Reference, p)
		}
	}
	for _, k := range removed {
		// What the active release no longer lists needs no removal.
		if _, ok := onActive[k]; ok {
			b.Remove = append(b.Remove, gen.Removal{Name: k.Name, Version: k.Version, Suite: k.Suite, Component: k.Component, Architecture: k.Architecture})
		}
	}
	res, err := runBuild(ctx, cfgPath, b)
	if err != nil {
		return nil, fmt.Errorf("rebase on release %s: %w", activeID(active), err)
	}
	return res, nil
}

func activeID(m *manifest.Manifest) string {
	if m == nil {
		return "(none)"
	}
	return m.ID
}
