package cli

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/armor-apt/armor/cli/config"
	"github.com/armor-apt/armor/gen"
)

// AddCmd builds a release that adds .deb files beyond the inputs armor.toml names.
type AddCmd struct {
	BuildFlags
	Files     []string `arg:"" name:"file" help:".deb files to add." type:"existingfile"`
	Suite     string   `help:"Suite (codename or suite name) to add to; default: the only suite."`
	Component string   `help:"Component to add to; default: the suite's only component, or main."`
}

// Help says what add does.
func (c *AddCmd) Help() string {
	return "Builds a release that is the parent plus these files, as armor build does with its inputs; armor push publishes it. The files need not stay: later builds keep the packages, as they keep every package of the parent."
}

// Run adds.
func (c *AddCmd) Run(g *Globals) error {
	cfg, err := config.Load(g.Config)
	if err != nil {
		return err
	}
	suite, comp, err := suiteComponent(cfg, c.Suite, c.Component, "--suite", "--component")
	if err != nil {
		return err
	}
	var adds []gen.Addition
	for _, f := range c.Files {
		abs, err := filepath.Abs(f)
		if err != nil {
			return err
		}
		adds = append(adds, gen.Addition{Suite: suite, Component: comp, Path: abs})
	}
	return build(g, c.BuildFlags, buildOptions{Add: adds})
}

// RemoveCmd builds a release without some packages of its parent.
type RemoveCmd struct {
	BuildFlags
	Packages  []string `arg:"" name:"package" help:"NAME or NAME=VERSION of the packages to remove."`
	Suite     string   `help:"Only from this suite (codename or suite name)."`
	Component string   `help:"Only from this component."`
	Arch      string   `help:"Only this architecture."`
}

// Help says what remove does.
func (c *RemoveCmd) Help() string {
	return "Builds a release that is the parent without these packages (every version, unless NAME=VERSION), in every suite, component and architecture unless narrowed; armor push publishes it. A package the parent does not list is an error, and so is one whose file is still among the inputs (the next build would add it again): nothing is changed then."
}

// Run removes.
func (c *RemoveCmd) Run(g *Globals) error {
	suite := c.Suite
	if suite != "" {
		cfg, err := config.Load(g.Config)
		if err != nil {
			return err
		}
		if suite, err = codename(cfg, suite, "--suite"); err != nil {
			return err
		}
	}
	var rs []gen.Removal
	for _, p := range c.Packages {
		name, version, err := nameVersion(p)
		if err != nil {
			return err
		}
		rs = append(rs, gen.Removal{Name: name, Version: version, Suite: suite, Component: c.Component, Architecture: c.Arch})
	}
	return build(g, c.BuildFlags, buildOptions{Remove: rs})
}

// CopyCmd builds a release in which packages of one suite are listed in another too.
type CopyCmd struct {
	BuildFlags
	Packages []string `arg:"" name:"package" help:"NAME or NAME=VERSION of the packages to copy; without a version, the newest of each architecture."`
	From     string   `required:"" help:"SUITE or SUITE/COMPONENT to copy from (codename or suite name)."`
	To       string   `required:"" help:"SUITE or SUITE/COMPONENT to copy to; the component defaults to the source's."`
}

// Help says what copy does.
func (c *CopyCmd) Help() string {
	return "Builds a release in which the packages are listed in the target suite as well (testing to stable, say), by reference: their pool files stay where they are, so nothing is uploaded again. armor push publishes it."
}

// Run copies.
func (c *CopyCmd) Run(g *Globals) error {
	cfg, err := config.Load(g.Config)
	if err != nil {
		return err
	}
	fs, fc, _ := strings.Cut(c.From, "/")
	fromSuite, fromComp, err := suiteComponent(cfg, fs, fc, "--from", "--from")
	if err != nil {
		return err
	}
	ts, tc, _ := strings.Cut(c.To, "/")
	if tc == "" {
		tc = fromComp
	}
	toSuite, toComp, err := suiteComponent(cfg, ts, tc, "--to", "--to")
	if err != nil {
		return err
	}
	var cs []gen.Copy
	for _, p := range c.Packages {
		name, version, err := nameVersion(p)
		if err != nil {
			return err
		}
		cs = append(cs, gen.Copy{Name: name, Version: version, FromSuite: fromSuite, FromComp: fromComp, ToSuite: toSuite, ToComponent: toComp})
	}
	return build(g, c.BuildFlags, buildOptions{Copy: cs})
}

// nameVersion splits NAME[=VERSION].
func nameVersion(arg string) (string, string, error) {
	name, version, _ := strings.Cut(arg, "=")
	if name == "" || strings.ContainsAny(name, " /_") || strings.HasSuffix(arg, "=") {
		return "", "", fmt.Errorf("package %q: write NAME or NAME=VERSION", arg)
	}
	return name, version, nil
}

// codename resolves a suite given by codename or suite name.
func codename(cfg *config.File, name, flag string) (string, error) {
	var names []string
	for _, s := range cfg.Suites {
		if s.Codename == name || s.Suite == name {
			return s.Codename, nil
		}
		names = append(names, s.Codename)
	}
	return "", fmt.Errorf("%s %q: no such suite in %s (suites: %s)", flag, name, cfg.Path, strings.Join(names, ", "))
}

// suiteComponent resolves a suite and component, with defaults: the only suite; the
// suite's only component, or main.
func suiteComponent(cfg *config.File, suite, comp, suiteFlag, compFlag string) (string, string, error) {
	var s *config.Suite
	if suite == "" {
		if len(cfg.Suites) != 1 {
			return "", "", fmt.Errorf("%s has %d suites: say which with %s", cfg.Path, len(cfg.Suites), suiteFlag)
		}
		s = &cfg.Suites[0]
	} else {
		cn, err := codename(cfg, suite, suiteFlag)
		if err != nil {
			return "", "", err
		}
		for i := range cfg.Suites {
			if cfg.Suites[i].Codename == cn {
				s = &cfg.Suites[i]
			}
		}
	}
	switch {
	case comp != "":
		if !slices.Contains(s.Components, comp) {
			return "", "", fmt.Errorf("%s: suite %s has no component %q (components: %s)", compFlag, s.Codename, comp, strings.Join(s.Components, ", "))
		}
	case len(s.Components) == 1:
		comp = s.Components[0]
	case slices.Contains(s.Components, "main"):
		comp = "main"
	default:
		return "", "", fmt.Errorf("suite %s has several components: say which with %s", s.Codename, compFlag)
	}
	return s.Codename, comp, nil
}

// PhaseCmd builds a release in which a package version reaches only a share of machines.
type PhaseCmd struct {
	BuildFlags
	Name    string `arg:"" help:"Package name."`
	Version string `arg:"" help:"Package version."`
	Percent int    `arg:"" help:"Share of machines that take the update, 0 to 100 (100: every machine, no phasing)."`
	Suite   string `help:"Only in this suite (codename or suite name)."`
}

// Help says how apt phases.
func (c *PhaseCmd) Help() string {
	return "Sets Phased-Update-Percentage in the version's stanza, as Ubuntu phases updates: apt 2.1 and later install it on that share of machines only (each decides by a hash of its machine id), and hold it back on the others. Raise the share as confidence grows; 0 stops the rollout; 100 ends the phasing. The package file does not change, so nothing but the indexes is uploaded. armor push publishes it."
}

// Run phases.
func (c *PhaseCmd) Run(g *Globals) error {
	if c.Percent < 0 || c.Percent > 100 {
		return fmt.Errorf("phase %s %s: %d is not a percentage from 0 to 100", c.Name, c.Version, c.Percent)
	}
	suite := c.Suite
	if suite != "" {
		cfg, err := config.Load(g.Config)
		if err != nil {
			return err
		}
		if suite, err = codename(cfg, suite, "--suite"); err != nil {
			return err
		}
	}
	ph := gen.Phase{Name: c.Name, Version: c.Version, Suite: suite}
	if c.Percent < 100 {
		ph.Percent = fmt.Sprint(c.Percent)
	}
	return build(g, c.BuildFlags, buildOptions{Phase: []gen.Phase{ph}})
}
