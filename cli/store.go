package cli

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/armor-apt/armor/cli/config"
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

Without controld, --manifest FILE checks the release of a local manifest.

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
	if err := printStoreCheck(g, rep); err != nil {
		return err
	}
	return checkFailure(rep)
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
func runStoreCheck(ctx context.Context, cfgPath string, o storeCheckOptions) (*publish.CheckReport, error) {
	cfg, err := config.Load(cfgPath)
	if err != nil {
		return nil, fmt.Errorf("%w (the store to check is named in armor.toml)", err)
	}
	rels, err := releasesToCheck(ctx, cfgPath, cfg, o)
	if err != nil {
		return nil, err
	}
	s := o.Store
	if s == nil {
		if s, err = openStore(ctx, cfg); err != nil {
			return nil, err
		}
	}
	return publish.Check(ctx, publish.CheckOptions{
		Store: s, Releases: rels, ReadData: o.ReadData, Jobs: o.Jobs, Progress: newCheckBar(o.Progress),
	})
}

// releasesToCheck returns the local manifest's release, or the releases controld keeps.
func releasesToCheck(ctx context.Context, cfgPath string, cfg *config.File, o storeCheckOptions) ([]publish.CheckRelease, error) {
	if o.Manifest != "" {
		rel, err := publish.LocalRelease(o.Manifest)
		if err != nil {
			return nil, err
		}
		return []publish.CheckRelease{rel}, nil
	}
	if o.Control.Controld == "" && cfg.Controld.URL == "" {
		return nil, fmt.Errorf("%s: no controld configured to list the releases: set [controld] url, --controld or $ARMOR_CONTROLD_URL, or check a local manifest with --manifest %s",
			cfg.Path, cfg.Resolve(cfg.Output.Manifest))
	}
	cl, repo, err := o.Control.target(&Globals{Config: cfgPath})
	if err != nil {
		return nil, err
	}
	return publish.ReleasesToCheck(ctx, cl, repo, o.Release, o.Served)
}

// checkFailure is the error that makes a check with problems exit 1.
func checkFailure(r *publish.CheckReport) error {
	if len(r.Problems) == 0 {
		return nil
	}
	return &exitError{code: exitFailure, err: fmt.Errorf("store %s: %d object(s) missing or damaged (listed in the output)", r.Store, len(r.Problems))}
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
