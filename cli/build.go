package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/armor-apt/armor/cli/config"
	"github.com/armor-apt/armor/gen"
	"github.com/armor-apt/armor/internal/atomicfile"
	"github.com/armor-apt/armor/internal/lockfile"
	"github.com/armor-apt/armor/manifest"
)

// BuildCmd builds the tree and the manifest.
type BuildCmd struct {
	Verify bool `help:"Rehash every input instead of trusting path, size and mtime."`
	Resign bool `help:"Re-sign every Release even if nothing changed (refreshes Date and Valid-Until)."`
}

// Run builds.
func (c *BuildCmd) Run(g *Globals) error {
	res, err := runBuild(g.ctx, g.Config, buildOptions{Verify: c.Verify, Resign: c.Resign, Progress: newProgress(g.stderr, "build")})
	if err != nil {
		return err
	}
	return printBuild(g, res)
}

type buildOptions struct {
	Verify, Resign bool
	Progress       func(gen.Progress)
	Now            func() time.Time
}

type buildResult struct {
	Manifest string    `json:"manifest"`
	Tree     string    `json:"tree"`
	Release  string    `json:"release"`
	Parent   string    `json:"parent,omitempty"`
	UpToDate bool      `json:"up_to_date"`
	Stats    gen.Stats `json:"stats"`
	Elapsed  float64   `json:"elapsed_seconds"`
	m        *manifest.Manifest
}

// buildDate is SOURCE_DATE_EPOCH when set, so builds are reproducible, else now.
func buildDate(now func() time.Time) (time.Time, error) {
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH=%q is not a Unix time in seconds", s)
		}
		return time.Unix(n, 0).UTC(), nil
	}
	if now == nil {
		now = time.Now
	}
	return now().UTC().Truncate(time.Second), nil
}

// loadPrevious reads the manifest of the last build; a missing file means a first build.
func loadPrevious(path string) (*manifest.Manifest, error) {
	m, err := manifest.Load(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w (restore it from git, or delete it to rebuild from scratch)", err)
	}
	return m, nil
}

func runBuild(ctx context.Context, cfgPath string, o buildOptions) (*buildResult, error) {
	start := time.Now()
	cfg, err := config.Load(cfgPath)
	if err != nil {
		return nil, err
	}
	opts, err := genOptions(cfg)
	if err != nil {
		return nil, err
	}
	// The key first: a runner without a usable key, or with one apt users' keyring
	// rejects, stops before it takes the lock or writes anything.
	if opts.Key, err = signingKey(cfg); err != nil {
		return nil, err
	}
	// One build at a time, and none during a push: from loading the previous manifest to
	// writing the new one.
	unlock, err := lockfile.Lock(opts.CacheDir, true)
	if err != nil {
		return nil, err
	}
	defer unlock()
	manifestPath := cfg.Resolve(cfg.Output.Manifest)
	// The build loads the previous manifest while it lists the inputs.
	opts.LoadPrevious = func() (*manifest.Manifest, error) { return loadPrevious(manifestPath) }
	if opts.Date, err = buildDate(o.Now); err != nil {
		return nil, err
	}
	opts.Verify, opts.Resign, opts.Progress = o.Verify, o.Resign, o.Progress
	res, err := gen.Build(ctx, opts)
	if err != nil {
		return nil, err
	}
	if !res.UpToDate {
		if err := atomicfile.WriteFile(manifestPath, res.Encoded, 0o644); err != nil {
			return nil, err
		}
	}
	out := &buildResult{
		Manifest: manifestPath, Tree: opts.TreeDir, UpToDate: res.UpToDate,
		Stats: res.Stats, Elapsed: time.Since(start).Seconds(), m: res.Manifest,
	}
	if res.Manifest != nil {
		out.Release, out.Parent = res.Manifest.ID, res.Manifest.Parent
	}
	return out, nil
}

// genOptions maps armor.toml onto the build library's options.
func genOptions(cfg *config.File) (gen.Options, error) {
	o := gen.Options{
		Repository:  cfg.Repository.Name,
		Origin:      cfg.Repository.Origin,
		Label:       cfg.Repository.Label,
		Description: cfg.Repository.Description,
		BaseDir:     cfg.Dir(),
		TreeDir:     cfg.Resolve(cfg.Output.Tree),
		CacheDir:    cfg.Resolve(cfg.Output.Cache),
		Hash:        signHash(cfg),
	}
	for _, s := range cfg.Suites {
		gs := gen.Suite{
			Suite: s.Suite, Codename: s.Codename, Description: s.Description,
			Components: s.Components, Architectures: s.Architectures, Inputs: s.Inputs,
			AllowEmpty: s.AllowEmpty,
		}
		if s.ValidFor != "" {
			d, err := config.PositiveDuration(s.ValidFor)
			if err != nil {
				return o, err
			}
			gs.ValidFor = d
		}
		o.Suites = append(o.Suites, gs)
	}
	return o, nil
}

func printBuild(g *Globals, r *buildResult) error {
	if g.JSON {
		return printJSON(g.stdout, r)
	}
	w := g.stdout
	s := r.Stats
	if r.UpToDate {
		fmt.Fprintf(w, "up to date: release %s, %d packages (%d inputs checked, %.2fs)\n", short(r.Release), s.Packages, s.Inputs, r.Elapsed)
		return nil
	}
	fmt.Fprintf(w, "built release %s", short(r.Release))
	if r.Parent != "" {
		fmt.Fprintf(w, " (parent %s)", short(r.Parent))
	}
	fmt.Fprintf(w, " in %.2fs\n", r.Elapsed)
	fmt.Fprintf(w, "  packages: %d (%d added or changed, %d removed); inputs: %d (%d read)\n", s.Packages, s.Added, s.Removed, s.Inputs, s.Read)
	fmt.Fprintf(w, "  indexes rewritten: %d; suites signed: %d; files written: %d (%s)\n", s.IndexesWritten, s.SuitesSigned, s.FilesWritten, humanBytes(s.BytesWritten))
	fmt.Fprintf(w, "  tree: %s\n  manifest: %s\n", r.Tree, r.Manifest)
	return nil
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
