package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"text/tabwriter"

	"github.com/armor-apt/armor/cli/config"
	"github.com/armor-apt/armor/manifest"
	"github.com/armor-apt/armor/store"
)

// DiffCmd compares manifests: files, or releases recorded in controld.
type DiffCmd struct {
	ControlFlags
	Old    string `arg:"" optional:"" help:"Old release: a manifest file, or a release recorded in controld (its id, or a unique prefix of at least 4 hex digits). Default: the last committed manifest, from git."`
	New    string `arg:"" optional:"" help:"New release, as the old one. Default: the working manifest."`
	Active bool   `help:"Compare the repository's active release (in controld) with the one argument given, else with the working manifest: review a push --no-activate draft before armor activate."`
}

// Help is diff's detailed help: what each argument may be.
func (c *DiffCmd) Help() string {
	return `Each argument is a manifest file, or else a release recorded in controld: its id or a unique prefix of at least 4 hex digits, whose manifest is read from the store by its digest (a read token). With two arguments diff compares them; with one, that one against the working manifest (armor.toml's [output] manifest); with none, the working manifest against the one last committed in git. --active takes the active release as the old one.`
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
	src := &diffSources{g: g, flags: c.ControlFlags}
	switch {
	case c.Active && c.New != "":
		return nil, nil, &exitError{exitUsage, fmt.Errorf("diff --active compares the active release with one release (or the working manifest), not two")}
	case c.Active:
		old, err := src.active()
		if err != nil {
			return nil, nil, err
		}
		nu, err := src.argOrWorking(c.Old)
		return old, nu, err
	case c.Old != "":
		old, err := src.arg(c.Old)
		if err != nil {
			return nil, nil, err
		}
		nu, err := src.argOrWorking(c.New)
		return old, nu, err
	}
	path, err := src.workingPath()
	if err != nil {
		return nil, nil, err
	}
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

// diffSources reads the manifests diff compares: files, the working manifest, and
// releases of controld from the store, opening armor.toml, controld and the store only
// when an argument needs them.
type diffSources struct {
	g     *Globals
	flags ControlFlags
	cfg   *config.File
	store store.Store
}

func (d *diffSources) config() (*config.File, error) {
	if d.cfg == nil {
		cfg, err := config.Load(d.g.Config)
		if err != nil {
			return nil, err
		}
		d.cfg = cfg
	}
	return d.cfg, nil
}

func (d *diffSources) workingPath() (string, error) {
	cfg, err := d.config()
	if err != nil {
		return "", err
	}
	return cfg.Resolve(cfg.Output.Manifest), nil
}

// argOrWorking is arg's manifest, or the working manifest when arg is empty.
func (d *diffSources) argOrWorking(arg string) (*manifest.Manifest, error) {
	if arg != "" {
		return d.arg(arg)
	}
	path, err := d.workingPath()
	if err != nil {
		return nil, err
	}
	return manifest.Load(path)
}

// arg is the manifest an argument names: a file, else a release recorded in controld.
func (d *diffSources) arg(arg string) (*manifest.Manifest, error) {
	fi, err := os.Stat(arg)
	switch {
	case err == nil && !fi.IsDir():
		return manifest.Load(arg)
	case !releaseIDArg(arg) && errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("%s: no such manifest file, nor a release id (its id, or a unique prefix of at least %d hex digits, as armor releases list shows)", arg, minIDPrefix)
	case !releaseIDArg(arg):
		return manifest.Load(arg)
	}
	return d.release(arg)
}

// release reads the manifest of the recorded release id names, or of the active
// release when id is empty.
func (d *diffSources) release(id string) (*manifest.Manifest, error) {
	cfg, err := d.config()
	if err != nil {
		what := "release " + id
		if id == "" {
			what = "the active release"
		}
		return nil, fmt.Errorf("%w (%s is read from the store named in armor.toml)", err, what)
	}
	if d.store == nil {
		if d.store, err = openStore(d.g.ctx, cfg); err != nil {
			return nil, err
		}
	}
	m, _, err := recordedManifest(d.g.ctx, d.g.Config, cfg, d.flags, d.store, id)
	return m, err
}

func (d *diffSources) active() (*manifest.Manifest, error) { return d.release("") }

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
