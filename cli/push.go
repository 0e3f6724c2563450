package cli

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/armor-apt/armor/cli/config"
	"github.com/armor-apt/armor/controld/api"
	"github.com/armor-apt/armor/controld/client"
	"github.com/armor-apt/armor/internal/batchgc"
	"github.com/armor-apt/armor/publish"
	"github.com/armor-apt/armor/store"
)

// PushCmd uploads and records a release.
type PushCmd struct {
	ControldFlags
	NoActivate bool `help:"Record the release in controld as a draft, without activating it." xor:"store-only"`
	StoreOnly  bool `name:"store-only" help:"Only upload the release to the store; do not record it in controld (none is needed)." xor:"store-only"`
	DryRun     bool `help:"List what would be uploaded, after the same checks of controld and the token as a push; upload and record nothing."`
	Jobs       int  `help:"Objects checked and uploaded at once." default:"8"`
	Rebase     bool `help:"If the release it was built on is no longer active, apply its change again on the active release (re-signing here), and push that."`
	Force      bool `help:"Activate the release even if it, or a release it is built on, was rolled back, or it was deleted or is older than the active release: go back knowingly."`
	Repair     bool `help:"First check every object of the release in the store (as armor store check does) and upload again, from the local tree, each one it lacks or holds damaged."`
	ReadData   bool `name:"read-data" help:"With --repair, also rehash the store's objects, not only their sizes."`
}

// Help is push's detailed help: when it activates, and what its exit status says.
func (c *PushCmd) Help() string {
	return fmt.Sprintf(`Before it uploads anything, push checks that controld answers, that it knows the token ($ARMOR_TOKEN, or [controld] token_file), that the token may push to the repository (and activate, unless --no-activate), and that the repository exists. Without a controld (--controld, $ARMOR_CONTROLD_URL or [controld] url in armor.toml, in that order of precedence) push refuses unless --store-only.

The release is activated only on its parent: if controld's active release is no longer the release this one was built on (another push won the race, armor rollback re-published, or the manifest is stale), nothing is activated. Pushing a release that is already active again finishes the job.

With --rebase, a push refused that way applies the release's change (the packages it added and removed since its parent) again on the active release, re-signs it here, and pushes that, a few times if other pushes keep winning.

A release that armor rollback rolled back is not activated again by a push, nor is a release built on it: after a rollback, armor push --rebase applies a release's change on the active release (as a CI runner whose committed manifest is the rolled-back release needs), or armor build again (armor rollback leaves the local manifest on the active release) and push that, or push --force to re-activate the rolled-back release knowingly.

Exit status: %d when the release is pushed (and active, unless --no-activate); %d when it was refused because the release it was built on is not the active release: run armor push --rebase (or build on the active release with armor build --from-active and push again); %d when it was refused because it, or a release it is built on, was rolled back; %d on any other error.`,
		exitOK, exitStaleParent, exitRolledBack, exitFailure)
}

// Run pushes.
func (c *PushCmd) Run(g *Globals) error {
	o := pushOptions{
		Activate: !c.NoActivate, Force: c.Force, DryRun: c.DryRun, Jobs: c.Jobs, StoreOnly: c.StoreOnly,
		Controld: c.ControldFlags, Progress: g.stderr,
	}
	batchgc.Set()
	var repaired *publish.RepairReport
	if c.Repair {
		r, err := repair(g, c.Jobs, c.ReadData)
		if err != nil {
			return err
		}
		if !c.StoreOnly && !c.DryRun {
			recheckRepaired(g, c.ControldFlags, r)
		}
		repaired = r
	}
	res, err := runPush(g.ctx, g.Config, o)
	res.countRepaired(repaired)
	for attempt := 1; c.Rebase && attempt <= maxRebases; attempt++ {
		why := rebaseReason(res, err)
		if why == "" {
			break
		}
		if !g.JSON {
			fmt.Fprintf(g.stderr, "release %s %s: applying its change again on the active release\n", short(res.Release), why)
		}
		b, rerr := rebase(g.ctx, g.Config, o)
		if rerr != nil {
			return rerr
		}
		if !g.JSON {
			if perr := printBuild(g, b); perr != nil {
				return perr
			}
		}
		res, err = runPush(g.ctx, g.Config, o)
	}
	if res != nil {
		if perr := printPush(g, res); perr != nil && err == nil {
			err = perr
		}
	}
	return err
}

// rebaseReason says why push --rebase applies the pushed release's change again on the
// active release, or "" when it does not: the release it was built on is not active
// (another push won), or was rolled back (armor rollback ran while a manifest on it was
// committed). A release that was itself rolled back is not re-applied: that would undo
// the rollback.
func rebaseReason(res *pushResult, err error) string {
	var stale *publish.StaleParentError
	var rolledBack *publish.RolledBackError
	switch {
	case res == nil:
		return ""
	case errors.As(err, &stale):
		return fmt.Sprintf("was built on %s, but %s is active now", short(res.Parent), short(stale.Active))
	case errors.As(err, &rolledBack) && rolledBack.RolledBack.Release != res.Release:
		return fmt.Sprintf("is built on %s, which was rolled back", short(rolledBack.RolledBack.Release))
	}
	return ""
}

type pushOptions struct {
	Activate bool
	Force    bool // activate even a rolled-back release
	DryRun   bool
	Jobs     int
	// StoreOnly uploads without recording in controld; otherwise a controld is required.
	StoreOnly bool
	Controld  ControldFlags // over armor.toml's [controld] url
	Progress  io.Writer     // a terminal gets a progress bar
	// Store, when set, replaces the store named in armor.toml (tests count requests).
	Store store.Store
}

type pushResult struct {
	// Outcome is one of the outcome constants.
	Outcome       string   `json:"outcome"`
	Release       string   `json:"release"`
	Parent        string   `json:"parent"`                // "" for a first release
	Active        string   `json:"active,omitempty"`      // when refused: the active release
	RolledBack    string   `json:"rolled_back,omitempty"` // when refused so: the release rolled back
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
	Error         string   `json:"error,omitempty"`
	Elapsed       float64  `json:"elapsed_seconds"`
}

// What a push came to, as --json reports it.
const (
	outcomeDryRun    = "dry_run"
	outcomeStored    = "stored"    // in the store; not recorded (--store-only)
	outcomeRecorded  = "recorded"  // recorded as a draft (--no-activate)
	outcomeActivated = "activated" // recorded and active
	// outcomeRolledBack: the release, or one it is built on, was rolled back, so nothing
	// was activated (exit status exitRolledBack).
	outcomeRolledBack = "rolled_back"
	// outcomeStaleParent: the release it was built on is not the active release, so
	// nothing was activated (exit status exitStaleParent).
	outcomeStaleParent = "parent_not_active"
	outcomeFailed      = "failed" // in the store, then failed (see error)
)

// runPush maps armor.toml onto publish.Push and its result onto what push prints.
func runPush(ctx context.Context, cfgPath string, o pushOptions) (*pushResult, error) {
	cfg, err := config.Load(cfgPath)
	if err != nil {
		return nil, err
	}
	po := publish.PushOptions{
		Manifest: cfg.Resolve(cfg.Output.Manifest),
		Tree:     cfg.Resolve(cfg.Output.Tree),
		Cache:    cfg.Resolve(cfg.Output.Cache),
		Store:    o.Store,
		Remote:   cfg.Remote(),
		Jobs:     o.Jobs,
		DryRun:   o.DryRun,
		Progress: newPushBar(o.Progress),
	}
	if !o.StoreOnly {
		url := o.Controld.url(cfg)
		if url == "" {
			return nil, fmt.Errorf("no controld to record the release in: set [controld] url in %s, $ARMOR_CONTROLD_URL or --controld URL; or push with --store-only to upload to the store without recording; nothing was uploaded", cfg.Path)
		}
		po.Controld = &publish.Controld{
			URL: url, Repo: cfg.Repository.Name, Activate: o.Activate, Force: o.Force, TokenSource: tokenSource(cfg),
			Client: func() (*client.Client, error) { return controlClient(cfg, url, o.Controld.CACert) },
		}
	}
	r, err := publish.Push(ctx, po)
	if errors.Is(err, publish.ErrNoStore) {
		return nil, noStoreError(cfg)
	}
	if r == nil {
		return nil, preflightError(err, o.Controld, cfg)
	}
	res := newPushResult(r)
	if err == nil && !r.DryRun && po.Controld == nil {
		res.Note = "--store-only: the release is in the store, not recorded in controld"
	}
	var stale *publish.StaleParentError
	var rolledBack *publish.RolledBackError
	switch {
	case errors.As(err, &stale):
		res.Outcome, res.Active = outcomeStaleParent, stale.Active
	case errors.As(err, &rolledBack):
		res.Outcome, res.RolledBack = outcomeRolledBack, rolledBack.RolledBack.Release
	case err != nil:
		res.Outcome = outcomeFailed
	case r.DryRun:
		res.Outcome = outcomeDryRun
	case r.Activated:
		res.Outcome = outcomeActivated
	case r.Recorded:
		res.Outcome = outcomeRecorded
	default:
		res.Outcome = outcomeStored
	}
	if err != nil {
		res.Error = err.Error()
	}
	return res, err
}

// preflightError adds to an error of push's checks of controld what only the command
// knows: where the URL came from, and that nothing was uploaded.
func preflightError(err error, f ControldFlags, cfg *config.File) error {
	var pe *publish.PreflightError
	if !errors.As(err, &pe) {
		return err
	}
	hint := ""
	if errors.Is(err, publish.ErrControldUnreachable) {
		hint = " (the URL is from " + f.urlSource(cfg) + "; --store-only uploads without recording)"
	}
	return fmt.Errorf("%w%s; nothing was uploaded", err, hint)
}

// countRepaired counts the objects push --repair uploaded again as uploaded by this push:
// the push that follows finds them present, and would otherwise report "uploaded 0".
func (r *pushResult) countRepaired(rep *publish.RepairReport) {
	if r == nil || rep == nil {
		return
	}
	for _, p := range rep.Repaired {
		size := max(0, p.Size) // -1: a manifest, whose size controld does not record
		r.Uploaded++
		r.BytesUploaded += size
		if r.Present > 0 {
			r.Present--
			r.BytesPresent = max(0, r.BytesPresent-size)
		}
	}
}

func newPushResult(r *publish.PushResult) *pushResult {
	s := r.Uploads
	res := &pushResult{
		Release: r.Release, Parent: r.Parent, Manifest: r.Manifest, Store: r.Store,
		Objects: s.Objects, Known: s.Known, Present: s.Present, Uploaded: s.Uploaded,
		BytesUploaded: s.BytesUploaded, BytesPresent: s.BytesPresent,
		DryRun: r.DryRun, Recorded: r.Recorded, Activated: r.Activated, Controld: r.Controld,
		Elapsed: r.Elapsed.Seconds(),
	}
	for _, u := range s.WouldUpload {
		res.WouldUpload = append(res.WouldUpload, u.Path)
	}
	return res
}

func newPushBar(w io.Writer) func(publish.UploadProgress) {
	if !isTerminal(w) {
		return nil
	}
	b := &bar{w: w, bytes: true}
	return func(p publish.UploadProgress) { b.set("push", p.BytesDone, p.BytesTotal) }
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
	fmt.Fprintf(w, "  objects: %d; uploaded %d (%s), already present %d (%s), known present without asking (the last push, or the recorded parent) %d\n",
		r.Objects, r.Uploaded, humanBytes(r.BytesUploaded), r.Present, humanBytes(r.BytesPresent), r.Known)
	switch {
	case r.Outcome == outcomeStaleParent:
		fmt.Fprintf(w, "  not activated in controld %s: the release it was built on is not the active one\n", r.Controld)
	case r.Outcome == outcomeRolledBack:
		fmt.Fprintf(w, "  not activated in controld %s: release %s was rolled back\n", r.Controld, short(r.RolledBack))
	case r.Activated:
		fmt.Fprintf(w, "  recorded and activated in controld %s\n", r.Controld)
	case r.Recorded:
		fmt.Fprintf(w, "  recorded in controld %s (not activated: `armor activate %s`)\n", r.Controld, r.Release)
	case r.Note != "":
		fmt.Fprintf(w, "  %s\n", r.Note)
	}
	return nil
}

// repair mends the store's copy of the local release before a push (push --repair).
func repair(g *Globals, jobs int, readData bool) (*publish.RepairReport, error) {
	cfg, err := config.Load(g.Config)
	if err != nil {
		return nil, err
	}
	s, err := publish.OpenStore(g.ctx, cfg.Remote())
	if errors.Is(err, publish.ErrNoStore) {
		return nil, noStoreError(cfg)
	}
	if err != nil {
		return nil, err
	}
	r, err := publish.Repair(g.ctx, publish.RepairOptions{
		Store: s, Manifest: cfg.Resolve(cfg.Output.Manifest), Tree: cfg.Resolve(cfg.Output.Tree),
		Cache: cfg.Resolve(cfg.Output.Cache), ReadData: readData, Jobs: jobs,
	})
	if r != nil && !g.JSON {
		fmt.Fprintf(g.stderr, "repair: %d object(s) checked in %s; %d uploaded again, %d not in the local tree either\n",
			r.Check.Objects, r.Check.Store, len(r.Repaired), len(r.Unrepairable))
		for _, p := range r.Unrepairable {
			fmt.Fprintf(g.stderr, "  %s\n", problemLine(p))
		}
	}
	return r, err
}

// recheckRepaired has controld check again the objects push --repair uploaded, so that
// they leave the repository's known-missing set even when the push that follows records
// nothing (its release was recorded before). If controld cannot be asked, the push says
// so itself; recording a release reads its known-missing objects again anyway.
func recheckRepaired(g *Globals, f ControldFlags, r *publish.RepairReport) {
	objs := make([]api.ObjectRef, 0, len(r.Repaired))
	for _, p := range r.Repaired {
		objs = append(objs, api.ObjectRef{SHA256: p.SHA256, Size: p.Size})
	}
	if len(objs) == 0 {
		return
	}
	cf := ControlFlags{ControldFlags: f}
	cl, repo, err := cf.target(g)
	if err != nil {
		return
	}
	if _, err := cl.ReportMissing(g.ctx, repo, objs); err != nil && !g.JSON {
		fmt.Fprintf(g.stderr, "repair: controld could not check the repaired objects again: %v\n", err)
	}
}
