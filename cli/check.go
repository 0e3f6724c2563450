package cli

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/armor-apt/armor/cli/config"
	"github.com/armor-apt/armor/gate"
	"github.com/armor-apt/armor/gate/base"
	"github.com/armor-apt/armor/manifest"
)

// CheckCmd checks that every binary package of the built release can be installed.
type CheckCmd struct {
	Suite    []string `help:"Suite codename(s) to check (default: every suite whose check is not off)."`
	Packages []string `help:"Check these Packages files (plain, .gz or .xz) as one distribution instead of the release, as dose-distcheck does: a name none of them has is unmet. No armor.toml is read." type:"existingfile"`
	Arch     string   `help:"The architecture to check with --packages." default:"amd64"`
}

// Help says what the check decides.
func (c *CheckCmd) Help() string {
	return `Each binary package of the release in the manifest (output.manifest) must be installable: its Depends and Pre-Depends met (alternatives, versions, :any and :native, Provides, Multi-Arch) and no Conflicts or Breaks in the way, within its suite and the base repositories the suite names (base = [...]), as dose-distcheck decides it. Without a base, a relation on a name the repository does not list at all is reported, not failed. armor build runs the same check on what a change can affect (check = "refuse", "warn" or "off" per suite); armor check runs it on the whole release. Exit status 1 when a package cannot be installed.`
}

// Run checks.
func (c *CheckCmd) Run(g *Globals) error {
	if len(c.Packages) > 0 {
		return c.files(g)
	}
	cfg, err := config.Load(g.Config)
	if err != nil {
		return err
	}
	m, err := loadPrevious(cfg.Resolve(cfg.Output.Manifest))
	if err != nil {
		return err
	}
	if m == nil {
		return fmt.Errorf("check: no manifest at %s: run `armor build` first", cfg.Resolve(cfg.Output.Manifest))
	}
	run := newGateRun(cfg)
	st := &lazyStore{cfg: cfg}
	broken := 0
	for _, s := range cfg.Suites {
		if len(c.Suite) > 0 && !slices.Contains(c.Suite, s.Codename) || len(c.Suite) == 0 && s.CheckPolicy() == string(gate.Off) {
			continue
		}
		pkgs, err := treePackages(g, cfg, m, s, st)
		if err != nil {
			return err
		}
		rep, err := run.check(g.ctx, s, &gate.Suite{Codename: s.Codename, Architectures: s.Architectures, Release: pkgs})
		if err != nil {
			return err
		}
		run.reports = append(run.reports, rep)
		broken += len(rep.Broken)
	}
	if g.JSON {
		if err := printJSON(g.stdout, run.reports); err != nil {
			return err
		}
	} else {
		for _, r := range run.reports {
			fmt.Fprintf(g.stdout, "%s: %d package checks, %d cannot be installed\n", r.Suite, r.Checked, len(r.Broken))
		}
		printCheck(g.stdout, run.reports, run.notes, "")
	}
	if broken > 0 {
		return &exitError{exitFailure, fmt.Errorf("check: %d package checks fail in release %s", broken, short(m.ID))}
	}
	return nil
}

// treePackages reads a suite's binary packages from the release's Packages indexes: the
// tree's copies, or the store's when the tree lacks them.
func treePackages(g *Globals, cfg *config.File, m *manifest.Manifest, s config.Suite, st *lazyStore) ([]gate.Package, error) {
	byPath := map[string]manifest.File{}
	for _, f := range m.Files {
		byPath[f.Path] = f
	}
	tree := cfg.Resolve(cfg.Output.Tree)
	var out []gate.Package
	for _, comp := range s.Components {
		for _, arch := range s.Architectures {
			rel := "dists/" + s.Codename + "/" + comp + "/binary-" + arch + "/Packages"
			var f manifest.File
			var ok bool
			for _, ext := range []string{".xz", ".gz", ""} {
				if f, ok = byPath[rel+ext]; ok {
					break
				}
			}
			if !ok {
				continue // no package of the component for the architecture
			}
			data, err := os.ReadFile(filepath.Join(tree, f.Path))
			if sum := sha256.Sum256(data); err != nil || hex.EncodeToString(sum[:]) != f.SHA256 {
				if data, err = st.fetch(g.ctx, f.SHA256, f.Size); err != nil {
					return nil, fmt.Errorf("check: read %s: %w", f.Path, err)
				}
			}
			plain, err := base.Decompress(f.Path, data)
			if err != nil {
				return nil, fmt.Errorf("check: %w", err)
			}
			pkgs, err := gate.ReadPackages(plain, s.Codename+"/"+comp)
			if err != nil {
				return nil, fmt.Errorf("check: %w", err)
			}
			out = append(out, pkgs...)
		}
	}
	// Architecture: all is listed in each architecture's index: keep one of each.
	slices.SortStableFunc(out, func(a, b gate.Package) int {
		return strings.Compare(a.Name+" "+a.Version+" "+a.Architecture, b.Name+" "+b.Version+" "+b.Architecture)
	})
	return slices.CompactFunc(out, func(a, b gate.Package) bool {
		return a.Name == b.Name && a.Version == b.Version && a.Architecture == b.Architecture
	}), nil
}

// files checks Packages files alone.
func (c *CheckCmd) files(g *Globals) error {
	var pkgs []gate.Package
	for _, f := range c.Packages {
		data, err := os.ReadFile(f)
		if err != nil {
			return fmt.Errorf("check: %w", err)
		}
		plain, err := base.Decompress(f, data)
		if err != nil {
			return fmt.Errorf("check: %w", err)
		}
		more, err := gate.ReadPackages(plain, f)
		if err != nil {
			return fmt.Errorf("check: %w", err)
		}
		pkgs = append(pkgs, more...)
	}
	// The files are the whole distribution: nothing is taken as met from outside.
	rep, err := gate.Check(g.ctx, &gate.Suite{Codename: c.Arch, Architectures: []string{c.Arch}, Release: pkgs, HasBase: true})
	if err != nil {
		return fmt.Errorf("check: %w", err)
	}
	out := checkReport{Suite: strings.Join(c.Packages, " "), Policy: string(gate.Refuse), Checked: rep.Checked, Broken: []checkFinding{}, report: rep}
	for _, f := range rep.Broken {
		out.Broken = append(out.Broken, checkFinding{Package: f.Package.Name, Version: f.Package.Version, Architecture: f.Package.Architecture, In: f.Package.From, On: f.Architecture, Reasons: f.Reasons})
	}
	if g.JSON {
		if err := printJSON(g.stdout, []checkReport{out}); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(g.stdout, "%d package checks, %d cannot be installed\n", rep.Checked, len(rep.Broken))
		printCheck(g.stdout, []checkReport{out}, nil, "")
	}
	if len(rep.Broken) > 0 {
		return &exitError{exitFailure, fmt.Errorf("check: %d packages cannot be installed on %s", len(rep.Broken), c.Arch)}
	}
	return nil
}
