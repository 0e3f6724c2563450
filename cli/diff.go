package cli

import (
	"bytes"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"text/tabwriter"

	"github.com/armor-apt/armor/cli/config"
	"github.com/armor-apt/armor/manifest"
)

// DiffCmd compares manifests.
type DiffCmd struct {
	Old string `arg:"" optional:"" help:"Old manifest (default: the last committed manifest, from git)."`
	New string `arg:"" optional:"" help:"New manifest (default: the working manifest)."`
}

// Run diffs.
func (c *DiffCmd) Run(g *Globals) error {
	old, nu, err := c.load(g)
	if err != nil {
		return err
	}
	changes := manifest.Diff(old, nu)
	if g.JSON {
		if changes == nil {
			changes = []manifest.Change{}
		}
		return printJSON(g.stdout, changes)
	}
	printChanges(g.stdout, changes)
	return nil
}

func (c *DiffCmd) load(g *Globals) (*manifest.Manifest, *manifest.Manifest, error) {
	if c.Old != "" && c.New != "" {
		old, err := manifest.Load(c.Old)
		if err != nil {
			return nil, nil, err
		}
		nu, err := manifest.Load(c.New)
		return old, nu, err
	}
	if c.Old != "" {
		return nil, nil, fmt.Errorf("diff takes two manifests, or none (the working manifest against the last committed one)")
	}
	cfg, err := config.Load(g.Config)
	if err != nil {
		return nil, nil, err
	}
	path := cfg.Resolve(cfg.Output.Manifest)
	nu, err := manifest.Load(path)
	if err != nil {
		return nil, nil, err
	}
	committed, err := gitShowHead(path)
	if err != nil {
		return nil, nil, err
	}
	if committed == nil {
		return nil, nu, nil
	}
	old, err := manifest.Parse(committed, "HEAD:"+filepath.Base(path))
	return old, nu, err
}

// gitShowHead returns the committed content of path, or nil when git has no such file.
func gitShowHead(path string) ([]byte, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	dir := filepath.Dir(abs)
	var stderr bytes.Buffer
	cmd := exec.Command("git", "-C", dir, "show", "HEAD:./"+filepath.Base(abs))
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		if _, ok := err.(*exec.ExitError); ok {
			return nil, nil
		}
		return nil, fmt.Errorf("read the committed manifest with git: %w", err)
	}
	return out, nil
}

func printChanges(w io.Writer, changes []manifest.Change) {
	if len(changes) == 0 {
		fmt.Fprintln(w, "no package changes")
		return
	}
	tw := tabwriter.NewWriter(w, 2, 4, 1, ' ', 0)
	for _, c := range changes {
		where := c.Suite + "/" + c.Component + "/" + c.Architecture
		switch c.Kind {
		case manifest.Added:
			fmt.Fprintf(tw, "+ %s\t%s\t\t%s\n", c.Name, c.New, where)
		case manifest.Removed:
			fmt.Fprintf(tw, "- %s\t%s\t\t%s\n", c.Name, c.Old, where)
		case manifest.Rebuilt:
			fmt.Fprintf(tw, "~ %s\t%s\t(rebuilt, new file)\t%s\n", c.Name, c.Old, where)
		default:
			fmt.Fprintf(tw, "%s %s\t%s -> %s\t(%s)\t%s\n", map[string]string{manifest.Upgraded: "^", manifest.Downgraded: "v"}[c.Kind], c.Name, c.Old, c.New, c.Kind, where)
		}
	}
	tw.Flush()
}
