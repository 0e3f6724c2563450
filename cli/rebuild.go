package cli

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/armor-apt/armor/cli/config"
	"github.com/armor-apt/armor/gen"
	"github.com/armor-apt/armor/manifest"
	"github.com/armor-apt/armor/publish"
)

// RebuildCmd rebuilds a release from its parent and its change, and compares.
type RebuildCmd struct {
	Release string `arg:"" optional:"" help:"Release id (or a prefix) recorded in controld; default: the release in the manifest (output.manifest)."`
	Parent  string `help:"The parent release's manifest file (for example from git: git show HEAD~1:manifest.toml); default: fetched from controld and the store." type:"existingfile"`
	ControldFlags
}

// Help says what a rebuild proves.
func (c *RebuildCmd) Help() string {
	return `Builds the release again in a scratch directory, as a fresh runner would: from its parent (its indexes fetched from the store, or the tree) and its change (the packages it adds, their .deb files from the tree or the store, and those it removes), at the release's date and with the signing key, then compares the manifest and every file with the recorded ones byte for byte. Exit status 1 if anything differs.`
}

// Run rebuilds.
func (c *RebuildCmd) Run(g *Globals) error {
	cfg, err := config.Load(g.Config)
	if err != nil {
		return err
	}
	st := &lazyStore{cfg: cfg}
	target, encoded, err := c.target(g.ctx, cfg, st)
	if err != nil {
		return err
	}
	var parent *manifest.Manifest
	switch {
	case c.Parent != "":
		if parent, err = manifest.Load(c.Parent); err != nil {
			return err
		}
		if parent.ID != target.Parent {
			return fmt.Errorf("rebuild: %s is release %s, but release %s was built on %s", c.Parent, short(parent.ID), short(target.ID), short(target.Parent))
		}
	case target.Parent != "":
		if parent, err = c.recorded(g.ctx, cfg, st, target.Parent); err != nil {
			return fmt.Errorf("rebuild: the parent release %s: %w (or give its manifest with --parent)", short(target.Parent), err)
		}
	}
	rep, err := rebuild(g.ctx, cfg, st, target, encoded, parent)
	if err != nil {
		return err
	}
	return printRebuild(g, rep)
}

// target returns the release to rebuild and its manifest file's bytes.
func (c *RebuildCmd) target(ctx context.Context, cfg *config.File, st *lazyStore) (*manifest.Manifest, []byte, error) {
	path := cfg.Resolve(cfg.Output.Manifest)
	data, err := os.ReadFile(path)
	if err != nil && (c.Release == "" || !errors.Is(err, os.ErrNotExist)) {
		return nil, nil, fmt.Errorf("rebuild: %w", err)
	}
	if err == nil {
		m, err := manifest.Parse(data, path)
		if err != nil {
			return nil, nil, fmt.Errorf("rebuild: %s: %w", path, err)
		}
		if c.Release == "" || len(c.Release) >= 4 && len(c.Release) <= len(m.ID) && m.ID[:len(c.Release)] == c.Release {
			return m, data, nil
		}
	}
	m, err := c.recorded(ctx, cfg, st, c.Release)
	if err != nil {
		return nil, nil, fmt.Errorf("rebuild: release %s: %w", c.Release, err)
	}
	data, err = manifest.Marshal(m)
	return m, data, err
}

// recorded fetches a release controld recorded.
func (c *RebuildCmd) recorded(ctx context.Context, cfg *config.File, st *lazyStore, id string) (*manifest.Manifest, error) {
	url := c.ControldFlags.url(cfg)
	if url == "" {
		return nil, fmt.Errorf("no controld to fetch it from: set [controld] url in %s, $ARMOR_CONTROLD_URL or --controld URL", cfg.Path)
	}
	cl, err := readClient(cfg, url, c.CACert)
	if err != nil {
		return nil, err
	}
	r, err := publish.FindRelease(ctx, cl, cfg.Repository.Name, id)
	if err != nil {
		return nil, err
	}
	s, err := st.open(ctx)
	if err != nil {
		return nil, err
	}
	return publish.FetchRelease(ctx, s, r)
}

// rebuildReport is what a rebuild found.
type rebuildReport struct {
	Release  string   `json:"release"`
	Rebuilt  string   `json:"rebuilt"`
	Matches  bool     `json:"matches"`
	Compared int      `json:"files_compared"`
	Differ   []string `json:"differ"`
}

// rebuild builds target again from parent in a scratch directory and compares it with
// encoded (target's manifest file) and the digests target records.
func rebuild(ctx context.Context, cfg *config.File, st *lazyStore, target *manifest.Manifest, encoded []byte, parent *manifest.Manifest) (*rebuildReport, error) {
	scratch, err := os.MkdirTemp("", "armor-rebuild-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(scratch)
	opts, err := genOptions(cfg)
	if err != nil {
		return nil, err
	}
	// The change is the recorded one: no inputs, no mirroring of them.
	for i := range opts.Suites {
		opts.Suites[i].Inputs, opts.Suites[i].AllowEmpty, opts.Suites[i].Sync = nil, true, false
	}
	keys, _, err := signingKeys(cfg)
	if err != nil {
		return nil, err
	}
	opts.Key, opts.Also = keys[0], keys[1:]
	opts.TreeDir, opts.CacheDir = filepath.Join(scratch, "tree"), filepath.Join(scratch, "cache")
	opts.Previous = parent
	date, err := time.Parse(time.RFC3339, target.Date)
	if err != nil {
		return nil, fmt.Errorf("rebuild: release %s has date %q: %w", short(target.ID), target.Date, err)
	}
	// The build is asked for the date the release's build was asked for, which it records
	// when it dated the release later (a second after its parent): asked for the release's
	// own date, the build would date it the same but record no requested_date.
	// A release that push --rebase made asked for a date older than its parent's, and was
	// dated after the parent all the same: dated as a rebase, any release is dated as it was.
	opts.Date, opts.DateSource, opts.Rebase = date, gen.DateFromRelease, true
	if target.RequestedDate != "" {
		if opts.Date, err = time.Parse(time.RFC3339, target.RequestedDate); err != nil {
			return nil, fmt.Errorf("rebuild: release %s has requested_date %q: %w", short(target.ID), target.RequestedDate, err)
		}
	}
	// Valid-Until is judged at the release's own date, as its build judged it: a release
	// rebuilt after it expired is still the same release.
	opts.Now = func() time.Time { return date }
	tree := cfg.Resolve(cfg.Output.Tree)
	var paths map[string][]string // digest → paths of the release and its parent
	opts.Fetch = func(ctx context.Context, sum string, size int64) ([]byte, error) {
		if paths == nil {
			paths = objectPaths(target, parent)
		}
		return fromTreeOrStore(ctx, st, tree, paths[sum], sum, size)
	}
	if err := replayChange(ctx, &opts, st, tree, target, parent, scratch); err != nil {
		return nil, err
	}
	res, err := gen.Build(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("rebuild of release %s: %w", short(target.ID), err)
	}
	rep := &rebuildReport{Release: target.ID, Rebuilt: res.Manifest.ID}
	if !bytes.Equal(res.Encoded, encoded) {
		rep.Differ = append(rep.Differ, "the manifest")
	}
	recorded := target.Paths()
	err = filepath.WalkDir(opts.TreeDir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(opts.TreeDir, p)
		rel = filepath.ToSlash(rel)
		o, ok := recorded[rel]
		if !ok {
			return nil // the tree's own marker files
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rep.Compared++
		if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != o.SHA256 || int64(len(data)) != o.Size {
			rep.Differ = append(rep.Differ, rel)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, f := range target.Files {
		if _, err := os.Stat(filepath.Join(opts.TreeDir, filepath.FromSlash(f.Path))); err != nil && !slices.Contains(rep.Differ, f.Path) {
			if parent == nil || !slices.Contains(parent.Files, f) {
				rep.Differ = append(rep.Differ, f.Path+" (not made again)")
			}
		}
	}
	rep.Matches = len(rep.Differ) == 0 && rep.Rebuilt == rep.Release
	return rep, nil
}

// replayChange sets the build's change to the one that made target from parent: the
// packages it adds (their .deb from the tree or the store) and those it removes.
func replayChange(ctx context.Context, o *gen.Options, st *lazyStore, tree string, target, parent *manifest.Manifest, scratch string) error {
	added, removed := gen.Replay(parent, target)
	inParent := map[string]bool{}
	if parent != nil {
		for _, p := range parent.Packages {
			inParent[p.SHA256] = true
		}
	}
	for _, p := range added {
		if inParent[p.SHA256] {
			o.Reference = append(o.Reference, p) // a copy or a new phasing of what the parent has
			continue
		}
		file := filepath.Join(tree, filepath.FromSlash(p.Path))
		if fi, err := os.Stat(file); err != nil || fi.Size() != p.Size {
			data, err := st.fetch(ctx, p.SHA256, p.Size)
			if err != nil {
				return fmt.Errorf("rebuild: %s is neither in the tree nor fetched: %w", p.Path, err)
			}
			file = filepath.Join(scratch, "debs", p.SHA256, filepath.Base(p.Path))
			if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(file, data, 0o644); err != nil {
				return err
			}
		}
		o.Add = append(o.Add, gen.Addition{Suite: p.Suite, Component: p.Component, Path: file})
		if p.Phased != "" {
			o.Phase = append(o.Phase, gen.Phase{Name: p.Name, Version: p.Version, Suite: p.Suite, Percent: p.Phased})
		}
	}
	for _, k := range removed {
		o.Remove = append(o.Remove, gen.Removal{Name: k.Name, Version: k.Version, Suite: k.Suite, Component: k.Component, Architecture: k.Architecture})
	}
	return nil
}

// objectPaths maps each digest of the manifests to the paths that serve it.
func objectPaths(ms ...*manifest.Manifest) map[string][]string {
	out := map[string][]string{}
	for _, m := range ms {
		if m == nil {
			continue
		}
		for p, o := range m.Paths() {
			out[o.SHA256] = append(out[o.SHA256], p)
		}
	}
	return out
}

// fromTreeOrStore reads an object by digest: from the tree, at one of paths, else from
// the store.
func fromTreeOrStore(ctx context.Context, st *lazyStore, tree string, paths []string, sum string, size int64) ([]byte, error) {
	for _, p := range paths {
		if data, err := os.ReadFile(filepath.Join(tree, filepath.FromSlash(p))); err == nil {
			if s := sha256.Sum256(data); hex.EncodeToString(s[:]) == sum {
				return data, nil
			}
		}
	}
	return st.fetch(ctx, sum, size)
}

func printRebuild(g *Globals, r *rebuildReport) error {
	if g.JSON {
		if err := printJSON(g.stdout, r); err != nil {
			return err
		}
	} else {
		writeRebuild(g.stdout, r)
	}
	if !r.Matches {
		return &exitError{exitFailure, fmt.Errorf("rebuild: release %s is not reproduced: %d differences", short(r.Release), len(r.Differ))}
	}
	return nil
}

func writeRebuild(w io.Writer, r *rebuildReport) {
	if r.Matches {
		fmt.Fprintf(w, "release %s rebuilt byte for byte: the manifest and %d files\n", short(r.Release), r.Compared)
		return
	}
	fmt.Fprintf(w, "release %s rebuilt as %s: %d of %d files and the manifest compared, these differ:\n", short(r.Release), short(r.Rebuilt), len(r.Differ), r.Compared)
	for _, d := range r.Differ {
		fmt.Fprintf(w, "  %s\n", d)
	}
}
