package cli

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/armor-apt/armor/cli/config"
	"github.com/armor-apt/armor/controld/client"
	"github.com/armor-apt/armor/internal/atomicfile"
	"github.com/armor-apt/armor/internal/lockfile"
	"github.com/armor-apt/armor/manifest"
	"github.com/armor-apt/armor/publish"
	"github.com/armor-apt/armor/store"
	"github.com/schollz/progressbar/v3"
)

// PushCmd uploads and records a release.
type PushCmd struct {
	NoActivate bool `help:"Record the release in controld as a draft, without activating it."`
	DryRun     bool `help:"List what would be uploaded; upload and record nothing."`
	Jobs       int  `help:"Objects checked and uploaded at once." default:"8"`
}

// Run pushes.
func (c *PushCmd) Run(g *Globals) error {
	res, err := runPush(g.ctx, g.Config, pushOptions{
		Activate: !c.NoActivate, DryRun: c.DryRun, Jobs: c.Jobs,
		Progress: g.stderr,
	})
	if res != nil {
		if perr := printPush(g, res); perr != nil && err == nil {
			err = perr
		}
	}
	return err
}

// storeAttempts bounds retries of a store request: enough for a transient error, few
// enough that an endpoint that does not answer fails within about half a minute.
const storeAttempts = 3

type pushOptions struct {
	Activate bool
	DryRun   bool
	Jobs     int
	Progress io.Writer // a terminal gets a progress bar
	// Store, when set, replaces the store named in armor.toml (tests count requests).
	Store store.Store
}

type pushResult struct {
	Release       string   `json:"release"`
	Manifest      string   `json:"manifest_object"`
	Store         string   `json:"store"`
	Objects       int      `json:"objects"`
	Known         int      `json:"known"`
	Present       int      `json:"present"`
	Uploaded      int      `json:"uploaded"`
	BytesUploaded int64    `json:"bytes_uploaded"`
	BytesPresent  int64    `json:"bytes_present"`
	WouldUpload   []string `json:"would_upload,omitempty"`
	DryRun        bool     `json:"dry_run"`
	Recorded      bool     `json:"recorded"`
	Activated     bool     `json:"activated"`
	Controld      string   `json:"controld,omitempty"`
	Note          string   `json:"note,omitempty"`
	Elapsed       float64  `json:"elapsed_seconds"`
}

func runPush(ctx context.Context, cfgPath string, o pushOptions) (*pushResult, error) {
	start := time.Now()
	cfg, err := config.Load(cfgPath)
	if err != nil {
		return nil, err
	}
	// A build must not rewrite the manifest and the tree while they are read and uploaded.
	unlock, err := lockfile.Lock(cfg.Resolve(cfg.Output.Cache), false)
	if err != nil {
		return nil, err
	}
	defer unlock()
	mpath := cfg.Resolve(cfg.Output.Manifest)
	mdata, err := os.ReadFile(mpath)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("no manifest at %s: run `armor build` first", mpath)
		}
		return nil, fmt.Errorf("read manifest: %w", err)
	}
	m, err := manifest.Parse(mdata, mpath)
	if err != nil {
		return nil, err
	}
	cas := o.Store
	if cas == nil {
		if cas, err = openStore(ctx, cfg); err != nil {
			return nil, err
		}
	}
	treeDir := cfg.Resolve(cfg.Output.Tree)
	uploads, err := treeUploads(m, treeDir)
	if err != nil {
		return nil, err
	}
	statePath := pushedStatePath(cfg, cas.String())
	known := knownObjects(statePath)
	msum := sha256.Sum256(mdata)
	mobj := hex.EncodeToString(msum[:])
	res := &pushResult{Release: m.ID, Manifest: mobj, Store: cas.String(), DryRun: o.DryRun}

	bar := newPushBar(o.Progress)
	stats, err := publish.UploadMissing(ctx, cas, uploads, publish.UploadOptions{
		Concurrency: o.Jobs, Known: known, DryRun: o.DryRun, Progress: bar,
	})
	res.fill(stats)
	if err != nil {
		return nil, fmt.Errorf("push to %s: %d of %d objects uploaded before the error; run armor push again to finish: %w", cas, stats.Uploaded, stats.Objects, err)
	}
	// The manifest goes last: a store holding it holds the whole release.
	mstats, err := publish.UploadMissing(ctx, cas, []publish.Upload{{SHA256: mobj, Size: int64(len(mdata)), Path: mpath}},
		publish.UploadOptions{Known: known, DryRun: o.DryRun})
	res.add(mstats)
	if err != nil {
		return nil, fmt.Errorf("push manifest to %s: %w; run armor push again to finish", cas, err)
	}
	res.Elapsed = time.Since(start).Seconds()
	if o.DryRun {
		return res, nil
	}
	// Remember what the store now holds, so the next push does not even ask about it.
	if err := atomicfile.WriteFile(statePath, mdata, 0o644); err != nil {
		return res, err
	}
	if cfg.Controld.URL == "" {
		res.Note = "no controld configured ([controld] url in armor.toml): the release is in the store but not recorded"
		return res, nil
	}
	res.Controld = cfg.Controld.URL
	if err := record(ctx, cfg, m, mobj, o.Activate, res); err != nil {
		return res, err
	}
	res.Elapsed = time.Since(start).Seconds()
	return res, nil
}

func (r *pushResult) fill(s publish.UploadStats) {
	r.Objects, r.Known, r.Present, r.Uploaded = s.Objects, s.Known, s.Present, s.Uploaded
	r.BytesUploaded, r.BytesPresent = s.BytesUploaded, s.BytesPresent
	for _, u := range s.WouldUpload {
		r.WouldUpload = append(r.WouldUpload, u.Path)
	}
}

func (r *pushResult) add(s publish.UploadStats) {
	r.Objects += s.Objects
	r.Known += s.Known
	r.Present += s.Present
	r.Uploaded += s.Uploaded
	r.BytesUploaded += s.BytesUploaded
	r.BytesPresent += s.BytesPresent
	for _, u := range s.WouldUpload {
		r.WouldUpload = append(r.WouldUpload, u.Path)
	}
}

// treeUploads maps every object of the release to a file of the local tree holding it.
func treeUploads(m *manifest.Manifest, treeDir string) ([]publish.Upload, error) {
	paths := m.Paths()
	names := make([]string, 0, len(paths))
	for p := range paths {
		names = append(names, p)
	}
	sort.Strings(names)
	seen := make(map[string]bool, len(paths))
	out := make([]publish.Upload, 0, len(paths))
	for _, p := range names {
		o := paths[p]
		if seen[o.SHA256] {
			continue
		}
		seen[o.SHA256] = true
		out = append(out, publish.Upload{SHA256: o.SHA256, Size: o.Size, Path: filepath.Join(treeDir, filepath.FromSlash(p))})
	}
	return out, nil
}

// pushedStatePath is where push keeps the last manifest it pushed to a store: its
// objects are known to be there, so the next push asks only about new ones.
func pushedStatePath(cfg *config.File, cas string) string {
	h := sha256.Sum256([]byte(cas))
	return filepath.Join(cfg.Resolve(cfg.Output.Cache), "pushed-"+hex.EncodeToString(h[:8])+".toml")
}

func knownObjects(path string) map[string]bool {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil // no state: every object is checked
	}
	m, err := manifest.Parse(data, path)
	if err != nil {
		return nil
	}
	known := map[string]bool{}
	for _, o := range m.Objects() {
		known[o.SHA256] = true
	}
	// The pushed manifest itself is an object too.
	s := sha256.Sum256(data)
	known[hex.EncodeToString(s[:])] = true
	return known
}

// record hands the release to controld and, unless told not to, activates it, expecting
// the release that is active now to still be active (compare-and-swap).
func record(ctx context.Context, cfg *config.File, m *manifest.Manifest, mobj string, activate bool, res *pushResult) error {
	c, err := controlClient(cfg, "")
	if err != nil {
		return err
	}
	repo := cfg.Repository.Name
	expect := ""
	if activate {
		st, err := c.Status(ctx, repo)
		if err != nil {
			return controldError(cfg.Controld.URL, repo, err)
		}
		if st.Active != nil {
			expect = st.Active.Release
		}
	}
	already := activate && expect == m.ID
	if already || !activate {
		expect = ""
	}
	rr, err := c.RecordRelease(ctx, repo, mobj, activate && !already, expect)
	if err != nil {
		return controldError(cfg.Controld.URL, repo, err)
	}
	res.Recorded = true
	res.Activated = rr.Activation != nil || already
	return nil
}

func controldError(url, repo string, err error) error {
	var ae *client.APIError
	if errors.As(err, &ae) && ae.Status == 404 {
		return fmt.Errorf("controld %s: %w (create the repository with `armor repos create`)", url, err)
	}
	if errors.Is(err, client.ErrConflict) {
		return fmt.Errorf("controld %s: repository %s: %w; someone activated another release meanwhile: check `armor status` and push again", url, repo, err)
	}
	return fmt.Errorf("controld %s: %w", url, err)
}

func newPushBar(w io.Writer) func(publish.UploadProgress) {
	if w == nil || !isTerminal(w) {
		return nil
	}
	var mu sync.Mutex
	var bar *progressbar.ProgressBar
	return func(p publish.UploadProgress) {
		mu.Lock()
		defer mu.Unlock()
		if bar == nil {
			bar = progressbar.NewOptions64(p.BytesTotal,
				progressbar.OptionSetWriter(w),
				progressbar.OptionSetDescription("push"),
				progressbar.OptionShowBytes(true),
				progressbar.OptionShowCount(),
				progressbar.OptionClearOnFinish(),
				progressbar.OptionThrottle(100*time.Millisecond),
			)
		}
		bar.Set64(p.BytesDone)
	}
}

func printPush(g *Globals, r *pushResult) error {
	if g.JSON {
		return printJSON(g.stdout, r)
	}
	w := g.stdout
	if r.DryRun {
		fmt.Fprintf(w, "dry run: %d object(s) would be uploaded to %s\n", len(r.WouldUpload), r.Store)
		for _, p := range r.WouldUpload {
			fmt.Fprintf(w, "  %s\n", p)
		}
		return nil
	}
	fmt.Fprintf(w, "pushed release %s to %s in %.2fs\n", short(r.Release), r.Store, r.Elapsed)
	fmt.Fprintf(w, "  objects: %d; uploaded %d (%s), already present %d (%s), known from the last push %d\n",
		r.Objects, r.Uploaded, humanBytes(r.BytesUploaded), r.Present, humanBytes(r.BytesPresent), r.Known)
	switch {
	case r.Activated:
		fmt.Fprintf(w, "  recorded and activated in controld %s\n", r.Controld)
	case r.Recorded:
		fmt.Fprintf(w, "  recorded in controld %s (not activated: `armor activate %s`)\n", r.Controld, r.Release)
	case r.Note != "":
		fmt.Fprintf(w, "  %s\n", r.Note)
	}
	return nil
}
