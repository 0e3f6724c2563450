package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/armor-apt/armor/cli/config"
	"github.com/armor-apt/armor/manifest"
	"github.com/armor-apt/armor/publish"
	"github.com/armor-apt/armor/store"
)

// ExportCmd writes a release's whole tree from the store into a directory.
type ExportCmd struct {
	ControlFlags
	Dir     string `arg:"" help:"Directory to write dists/ and pool/ into (made if missing), for nginx or any static server." type:"path"`
	Release string `help:"Export this release recorded in controld (its id, or a unique prefix of at least 4 hex digits) instead of the local manifest's." xor:"which" placeholder:"ID"`
	Active  bool   `help:"Export the repository's active release, as controld says." xor:"which"`
	Verify  bool   `help:"Re-hash every file already in DIR before keeping it; without it, a pool/ or by-hash/ file of the listed size is kept."`
	Delete  bool   `help:"Then remove the files under DIR/dists and DIR/pool that the release does not list (nothing outside those two)."`
	Jobs    int    `help:"Files written at once." default:"8"`
}

// Help is export's detailed help: what is kept, the order of the writes.
func (c *ExportCmd) Help() string {
	return `By default it exports the release of the local manifest (armor.toml's [output] manifest); --release ID or --active export one that controld recorded (a read token). Every object comes from the store armor.toml names, checked against its size and SHA-256 as it is written; an object several paths share is read once and hard-linked (or copied).

Run again, it writes only what DIR lacks: a pool/ or by-hash/ file of the listed size is kept (--verify re-hashes it), and the indexes and Release files, whose names every release reuses, are re-hashed. Files are written atomically, pool/ and by-hash/ first, then the indexes, then Release and Release.gpg, and InRelease last, so apt reading DIR meanwhile never finds a listed file missing; --delete removes what the release does not list only after that.`
}

// Run exports.
func (c *ExportCmd) Run(g *Globals) error {
	res, err := runExport(g.ctx, g.Config, exportOptions{
		Control: c.ControlFlags, Release: c.Release, Active: c.Active, Dir: c.Dir,
		Verify: c.Verify, Delete: c.Delete, Jobs: c.Jobs, Progress: g.stderr,
	})
	if err != nil {
		return err
	}
	return printExport(g, res)
}

type exportOptions struct {
	Control  ControlFlags
	Release  string // a recorded release's id or prefix; "" for the local manifest
	Active   bool   // the active release
	Dir      string
	Verify   bool
	Delete   bool
	Jobs     int
	Progress io.Writer // a terminal gets a progress bar
	// Store, when set, replaces the store named in armor.toml (tests count requests).
	Store store.Store
}

// exportResult is what export prints.
type exportResult struct {
	*publish.ExportReport
	From    string  `json:"from"` // the manifest file, or "controld URL"
	Elapsed float64 `json:"elapsed_seconds"`
}

// runExport finds the release (the local manifest, or controld's) and exports it from
// the store armor.toml names.
func runExport(ctx context.Context, cfgPath string, o exportOptions) (*exportResult, error) {
	start := time.Now()
	cfg, err := config.Load(cfgPath)
	if err != nil {
		return nil, fmt.Errorf("%w (the store to export from is named in armor.toml)", err)
	}
	if err := exportDir(cfg, o.Dir); err != nil {
		return nil, err
	}
	s := o.Store
	if s == nil {
		if s, err = openStore(ctx, cfg); err != nil {
			return nil, err
		}
	}
	var m *manifest.Manifest
	from := cfg.Resolve(cfg.Output.Manifest)
	if o.Release != "" || o.Active {
		m, from, err = recordedManifest(ctx, cfgPath, cfg, o.Control, s, o.Release)
	} else {
		m, err = manifest.Load(from)
	}
	if err != nil {
		return nil, err
	}
	rep, err := publish.Export(ctx, publish.ExportOptions{
		Store: s, Manifest: m, Dir: o.Dir, Jobs: o.Jobs, Verify: o.Verify, Delete: o.Delete,
		Progress: newExportBar(o.Progress),
	})
	if errors.Is(err, store.ErrNotFound) && o.Release == "" && !o.Active {
		return nil, fmt.Errorf("%w (a release of a local manifest is in the store once armor push uploaded it)", err)
	}
	if err != nil {
		return nil, err
	}
	return &exportResult{ExportReport: rep, From: from, Elapsed: time.Since(start).Seconds()}, nil
}

// exportDir refuses to export into the tree armor build writes (symbolic links
// followed): a release exported there would replace the tree the next build starts from.
func exportDir(cfg *config.File, dir string) error {
	tree, err := filepath.Abs(cfg.Resolve(cfg.Output.Tree))
	if err != nil {
		return err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	if r, err := filepath.EvalSymlinks(abs); err == nil {
		abs = r
	}
	if r, err := filepath.EvalSymlinks(tree); err == nil {
		tree = r
	}
	if abs == tree {
		return &exitError{exitUsage, fmt.Errorf("export %s: that is the tree armor build writes ([output] tree in %s); export into another directory", dir, cfg.Path)}
	}
	return nil
}

// recordedManifest reads from the store the manifest of the release of controld that id
// names (an id or a prefix of one), or of the active release when id is empty; from
// says where it came from.
func recordedManifest(ctx context.Context, cfgPath string, cfg *config.File, f ControlFlags, s store.Store, id string) (m *manifest.Manifest, from string, err error) {
	if id != "" && !releaseIDArg(id) {
		return nil, "", &exitError{exitUsage, fmt.Errorf("release %q: give a release id, or a prefix of at least %d of its hex digits (armor releases list)", id, minIDPrefix)}
	}
	if f.Controld == "" && cfg.Controld.URL == "" {
		return nil, "", fmt.Errorf("%s: no controld configured to find release %s in: set [controld] url, --controld or $ARMOR_CONTROLD_URL", cfg.Path, cmp.Or(id, "(the active one)"))
	}
	cl, repo, err := f.target(&Globals{Config: cfgPath})
	if err != nil {
		return nil, "", err
	}
	var rel publish.RecordedRelease
	if id == "" {
		rel, err = publish.ActiveRelease(ctx, cl, repo)
	} else {
		rel, err = publish.FindRelease(ctx, cl, repo, id)
	}
	if err != nil {
		return nil, "", fmt.Errorf("controld %s: %w", f.url(cfg), err)
	}
	m, err = publish.FetchRelease(ctx, s, rel)
	return m, "controld " + f.url(cfg), err
}

// minIDPrefix is the fewest hex digits of a release id a command takes for the release.
// Four, as git's shortest abbreviation: what a user copies from a log or a page.
const minIDPrefix = 4

// releaseIDArg reports whether s reads as a release id or a prefix of one: at least
// minIDPrefix and at most 64 lowercase hex digits.
func releaseIDArg(s string) bool {
	if len(s) < minIDPrefix || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

func newExportBar(w io.Writer) func(publish.ExportProgress) {
	if !isTerminal(w) {
		return nil
	}
	b := &bar{w: w, bytes: true}
	return func(p publish.ExportProgress) { b.set("export", p.BytesDone, p.BytesTotal) }
}

func printExport(g *Globals, r *exportResult) error {
	if g.JSON {
		return printJSON(g.stdout, r)
	}
	w := g.stdout
	fmt.Fprintf(w, "exported release %s (from %s) to %s in %.2fs\n", short(r.Release), r.From, r.Dir, r.Elapsed)
	how := ""
	if r.Verified {
		how = ", re-hashed"
	}
	fmt.Fprintf(w, "  paths: %d; fetched %d object(s) (%s) from %s, linked %d, kept %d (%s%s)\n",
		r.Paths, r.Fetched, humanBytes(r.BytesFetched), r.Store, r.Linked, r.Kept, humanBytes(r.BytesKept), how)
	if len(r.Deleted) > 0 {
		fmt.Fprintf(w, "  deleted %d file(s) the release does not list\n", len(r.Deleted))
	}
	return nil
}
