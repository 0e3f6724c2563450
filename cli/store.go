package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/armor-apt/armor/cli/config"
	"github.com/armor-apt/armor/controld/api"
	"github.com/armor-apt/armor/controld/client"
	"github.com/armor-apt/armor/publish"
	"github.com/armor-apt/armor/store"
)

// StoreCmd groups the commands on the object store.
type StoreCmd struct {
	Check StoreCheckCmd `cmd:"" help:"Check that the store holds every object of the kept releases, intact."`
}

// StoreCheckCmd checks the store.
type StoreCheckCmd struct {
	ControlFlags
	Release  string `help:"Check only this recorded release (its id or a unique prefix of it)." xor:"which"`
	Served   bool   `help:"Check only the releases the edges serve: the active one and those retained within the repository's window." xor:"which"`
	Manifest string `help:"Check the release of this local manifest file instead (such as manifest.toml); controld is not asked." type:"path" xor:"which"`
	ReadData bool   `help:"Also read every object and check its SHA-256, not only its size (reads every byte the releases use)."`
	Jobs     int    `help:"Objects checked at once." default:"8"`
}

// Help is store check's detailed help: which releases, and what its exit status says.
func (c *StoreCheckCmd) Help() string {
	return fmt.Sprintf(`By default it checks every release recorded in controld (armor gc deletes objects only of releases it forgets); --served only the active release and those retained within the repository's window, --release one. For each it reads the manifest from the store by hash, then checks every object the manifest lists and the manifest object itself: missing from the store (named in armor.toml), or present with another size, or with --read-data another SHA-256. An object shared by several releases is checked once. Each problem is printed on one line with the object, its size and every release and path that uses it.

When the releases came from controld, the objects found missing or damaged are reported to it (the token needs push on the repository). controld checks each again itself and keeps those still gone in the repository's known-missing set: until they are back in the store, it refuses to record any release that uses them, even one whose active release uses them too. armor push --repair uploads them again from the local tree, and the push that follows takes them out of the set.

Without controld, --manifest FILE checks the release of a local manifest (nothing is reported).

Exit status: %d when the store holds every object intact; %d when any is missing or damaged, or the check could not finish.`,
		exitOK, exitFailure)
}

// Run checks the store.
func (c *StoreCheckCmd) Run(g *Globals) error {
	rep, err := runStoreCheck(g.ctx, g.Config, storeCheckOptions{
		Control: c.ControlFlags, Release: c.Release, Served: c.Served, Manifest: c.Manifest,
		ReadData: c.ReadData, Jobs: c.Jobs, Progress: g.stderr,
	})
	if err != nil {
		return err
	}
	if err := printStoreCheck(g, rep.CheckReport); err != nil {
		return err
	}
	return checkFailure(rep)
}

// storeCheckResult is a check's report and, when the releases came from controld and
// the check found objects gone, what controld said of them.
type storeCheckResult struct {
	*publish.CheckReport
	Reported    *api.MissingReportResponse // nil when nothing was reported
	ReportError error                      // the report to controld failed
}

type storeCheckOptions struct {
	Control  ControlFlags
	Release  string
	Served   bool
	Manifest string
	ReadData bool
	Jobs     int
	Progress io.Writer // a terminal gets a progress bar
	// Store, when set, replaces the store named in armor.toml.
	Store store.Store
}

// runStoreCheck picks the releases to check (a local manifest, or controld's), opens the
// store armor.toml names and checks it.
// When it checked controld's releases and found objects gone, it reports them to
// controld, which then refuses any release using them until they are back.
func runStoreCheck(ctx context.Context, cfgPath string, o storeCheckOptions) (*storeCheckResult, error) {
	cfg, err := config.Load(cfgPath)
	if err != nil {
		return nil, fmt.Errorf("%w (the store to check is named in armor.toml)", err)
	}
	rels, cl, repo, err := releasesToCheck(ctx, cfgPath, cfg, o)
	if err != nil {
		return nil, err
	}
	s := o.Store
	if s == nil {
		if s, err = openStore(ctx, cfg); err != nil {
			return nil, err
		}
	}
	rep, err := publish.Check(ctx, publish.CheckOptions{
		Store: s, Releases: rels, ReadData: o.ReadData, Jobs: o.Jobs, Progress: newCheckBar(o.Progress),
	})
	if err != nil {
		return nil, err
	}
	out := &storeCheckResult{CheckReport: rep}
	if objs := goneObjects(rep); cl != nil && len(objs) > 0 {
		out.Reported, out.ReportError = cl.ReportMissing(ctx, repo, objs)
	}
	return out, nil
}

// goneObjects are the objects a check found missing or damaged, as controld takes a
// report of them. A manifest object that holds its digest's bytes but not the release's
// manifest is intact as an object: not reported.
func goneObjects(r *publish.CheckReport) []api.ObjectRef {
	var out []api.ObjectRef
	for _, p := range r.Problems {
		if p.Kind != publish.ProblemManifest {
			out = append(out, api.ObjectRef{SHA256: p.SHA256, Size: p.Size})
		}
	}
	return out
}

// releasesToCheck returns the local manifest's release, or the releases controld keeps
// with the client and repository they came from.
func releasesToCheck(ctx context.Context, cfgPath string, cfg *config.File, o storeCheckOptions) ([]publish.CheckRelease, *client.Client, string, error) {
	if o.Manifest != "" {
		rel, err := publish.LocalRelease(o.Manifest)
		if err != nil {
			return nil, nil, "", err
		}
		return []publish.CheckRelease{rel}, nil, "", nil
	}
	if o.Control.Controld == "" && cfg.Controld.URL == "" {
		return nil, nil, "", fmt.Errorf("%s: no controld configured to list the releases: set [controld] url, --controld or $ARMOR_CONTROLD_URL, or check a local manifest with --manifest %s",
			cfg.Path, cfg.Resolve(cfg.Output.Manifest))
	}
	cl, repo, err := o.Control.target(&Globals{Config: cfgPath})
	if err != nil {
		return nil, nil, "", err
	}
	rels, err := publish.ReleasesToCheck(ctx, cl, repo, o.Release, o.Served)
	return rels, cl, repo, err
}

// checkFailure is the error that makes a check with problems exit 1; it says what
// controld made of the report.
func checkFailure(r *storeCheckResult) error {
	if len(r.Problems) == 0 {
		return nil
	}
	msg := fmt.Sprintf("store %s: %d object(s) missing or damaged (listed in the output)", r.Store, len(r.Problems))
	switch {
	case r.ReportError != nil:
		msg += fmt.Sprintf("; reporting them to controld failed (%v), so it still takes those of the active release as present", r.ReportError)
	case r.Reported != nil:
		msg += fmt.Sprintf("; controld found %d of them gone too and refuses every release that uses them until they are back: upload them with armor push --repair",
			len(r.Reported.Confirmed))
	}
	return &exitError{code: exitFailure, err: errors.New(msg)}
}

func newCheckBar(w io.Writer) func(publish.CheckProgress) {
	if !isTerminal(w) {
		return nil
	}
	b := &bar{w: w}
	return func(p publish.CheckProgress) { b.set("check", int64(p.ObjectsDone), int64(p.ObjectsTotal)) }
}

func printStoreCheck(g *Globals, r *publish.CheckReport) error {
	if g.JSON {
		return printJSON(g.stdout, r)
	}
	how := "sizes checked"
	if r.ReadData {
		how = "read and re-hashed"
	}
	w := g.stdout
	fmt.Fprintf(w, "checked %d release(s) in %s: %d object(s), %s, %s; %d problem(s)\n",
		len(r.Releases), r.Store, r.Objects, humanBytes(r.Bytes), how, len(r.Problems))
	for _, p := range r.Problems {
		fmt.Fprintln(w, problemLine(p))
	}
	return nil
}

// problemLine is one problem on one line: what, the object, its size, and its uses.
func problemLine(p publish.Problem) string {
	size := fmt.Sprintf("%d bytes", p.Size)
	if p.Size < 0 {
		size = "size unrecorded"
	}
	what := p.Kind
	switch p.Kind {
	case publish.ProblemSize:
		what += fmt.Sprintf(" (the store holds %d bytes)", p.GotSize)
	case publish.ProblemHash:
		what += fmt.Sprintf(" (the store holds %d bytes with sha256 %s)", p.GotSize, p.GotSHA256)
	case publish.ProblemManifest:
		what += " (" + p.Detail + ")"
	}
	return fmt.Sprintf("%s %s, %s, used by %s", what, p.SHA256, size, usesText(p.Uses))
}

// usesText lists uses grouped by path: "PATH in REL, REL; PATH in REL".
func usesText(uses []publish.Use) string {
	var parts []string
	for i := 0; i < len(uses); {
		j := i
		var rels []string
		for ; j < len(uses) && uses[j].Path == uses[i].Path; j++ {
			rels = append(rels, short(uses[j].Release))
		}
		parts = append(parts, uses[i].Path+" in "+strings.Join(rels, ", "))
		i = j
	}
	return strings.Join(parts, "; ")
}
