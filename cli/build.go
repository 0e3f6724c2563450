package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/armor-apt/armor/cli/config"
	"github.com/armor-apt/armor/controld/client"
	"github.com/armor-apt/armor/gen"
	"github.com/armor-apt/armor/internal/atomicfile"
	"github.com/armor-apt/armor/internal/batchgc"
	"github.com/armor-apt/armor/internal/lockfile"
	"github.com/armor-apt/armor/manifest"
	"github.com/armor-apt/armor/publish"
	"github.com/armor-apt/armor/store"
)

// BuildCmd builds the tree and the manifest.
type BuildCmd struct {
	BuildFlags
	Verify bool `help:"Rehash every input instead of trusting path, size and mtime."`
	Resign bool `help:"Re-sign every Release even if nothing changed (refreshes Date and Valid-Until)."`
	// VerifyReproducible rebuilds the new release as armor rebuild does.
	VerifyReproducible bool `name:"verify-reproducible" help:"Then build the release again in a scratch directory from its parent and change, as a fresh runner would, and fail unless every file and the manifest match byte for byte."`
}

// Help says what a build starts from and what it changes.
func (c *BuildCmd) Help() string {
	return `A release is its parent plus a change. The parent is the release in the manifest (output.manifest in armor.toml, committed to git), or with --from-active the release controld has active. The build adds the packages of the inputs; a package of the parent leaves only through armor remove, keep_versions, or a suite with sync = true whose input file is gone.

A runner that has only the git checkout fetches what it needs of the parent (its dists/ files, never its pool files) from the store named in armor.toml; its tree then holds dists/ and the new pool files, and armor export makes a complete tree.`
}

// BuildFlags are the options every command that builds takes.
type BuildFlags struct {
	FromActive    bool `name:"from-active" help:"Build on controld's active release instead of the local manifest."`
	AllowRemovals bool `name:"allow-removals" help:"Let a suite with sync = true lose more packages than its max_removals share."`
	ControldFlags
}

// Run builds.
func (c *BuildCmd) Run(g *Globals) error {
	return build(g, c.BuildFlags, buildOptions{Verify: c.Verify, Resign: c.Resign, Reproducible: c.VerifyReproducible})
}

// build runs a build with the flags and the change, and prints it.
func build(g *Globals, f BuildFlags, o buildOptions) error {
	o.FromActive, o.AllowRemovals, o.Controld = f.FromActive, f.AllowRemovals, f.ControldFlags
	o.Progress = newProgress(g.stderr, "build")
	batchgc.Set()
	res, err := runBuild(g.ctx, g.Config, o)
	if err != nil {
		return err
	}
	return printBuild(g, res)
}

type buildOptions struct {
	Verify, Resign bool
	Reproducible   bool // rebuild the release and compare (--verify-reproducible)
	Progress       func(gen.Progress)
	Now            func() time.Time

	// The change beyond the inputs (armor add, remove and copy).
	Add    []gen.Addition
	Remove []gen.Removal
	Copy   []gen.Copy
	// Reference lists packages whose files the parent publishes (a rebase).
	Reference []manifest.Package
	Phase     []gen.Phase

	AllowRemovals bool
	FromActive    bool               // the parent is controld's active release
	Parent        *manifest.Manifest // the parent, when the caller has it (a rebase)
	Rebase        bool               // the change is applied again on a newer parent (push --rebase)
	Controld      ControldFlags      // over armor.toml's [controld] url
	// Store, when set, replaces the store named in armor.toml (tests count requests).
	Store store.Store
}

type buildResult struct {
	Manifest string    `json:"manifest"`
	Tree     string    `json:"tree"`
	Release  string    `json:"release"`
	Parent   string    `json:"parent,omitempty"`
	UpToDate bool      `json:"up_to_date"`
	Stats    gen.Stats `json:"stats"`
	// Changes lists the packages added, removed, upgraded or downgraded since the parent.
	Changes []manifest.Change `json:"changes"`
	Elapsed float64           `json:"elapsed_seconds"`
	// Reproduced is what --verify-reproducible found.
	Reproduced *rebuildReport `json:"reproduced,omitempty"`
	// Check is what the installability check found, by suite checked.
	Check []checkReport `json:"check,omitempty"`
	// Warnings are about the build's setting, not its packages (a secret left behind).
	Warnings   []string `json:"warnings,omitempty"`
	checkNotes []string
	m          *manifest.Manifest
}

// buildDate is SOURCE_DATE_EPOCH when set, else armor.toml's date (configDate), so
// builds are reproducible, else now.
func buildDate(now func() time.Time, configDate ...string) (time.Time, error) {
	date, _, err := buildDateFrom(now, configDate...)
	return date, err
}

// buildDateFrom is buildDate and where the date came from, which a build names when it
// refuses a date older than its parent's.
func buildDateFrom(now func() time.Time, configDate ...string) (time.Time, gen.DateSource, error) {
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return time.Time{}, 0, fmt.Errorf("SOURCE_DATE_EPOCH=%q is not a Unix time in seconds", s)
		}
		return time.Unix(n, 0).UTC(), gen.DateFromEnv, nil
	}
	if len(configDate) > 0 && configDate[0] != "" {
		date, err := config.ParseDate(configDate[0])
		return date, gen.DateFromConfig, err
	}
	if now == nil {
		now = time.Now
	}
	return now().UTC().Truncate(time.Second), gen.DateFromClock, nil
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
	keys, keyWarnings, err := signingKeys(cfg)
	if err != nil {
		return nil, err
	}
	opts.Key, opts.Also = keys[0], keys[1:]
	// One build at a time, and none during a push: from loading the previous manifest to
	// writing the new one.
	unlock, err := lockfile.Lock(opts.CacheDir, true)
	if err != nil {
		return nil, err
	}
	defer unlock()
	manifestPath := cfg.Resolve(cfg.Output.Manifest)
	st := &lazyStore{cfg: cfg, s: o.Store}
	opts.Fetch = st.read
	switch {
	case o.Parent != nil:
		opts.Previous = o.Parent
	case o.FromActive:
		if opts.Previous, err = activeParent(ctx, cfg, o.Controld, st); err != nil {
			return nil, err
		}
		opts.SuggestFlags = " --from-active"
	default:
		// The build loads the previous manifest while it lists the inputs.
		opts.LoadPrevious = func() (*manifest.Manifest, error) { return loadPrevious(manifestPath) }
	}
	opts.Now = o.Now
	if opts.Date, opts.DateSource, err = buildDateFrom(o.Now, cfg.Date); err != nil {
		return nil, err
	}
	opts.Rebase = o.Rebase
	opts.Verify, opts.Resign, opts.Progress = o.Verify, o.Resign, o.Progress
	opts.Add, opts.Remove, opts.Copy, opts.AllowRemovals = o.Add, o.Remove, o.Copy, o.AllowRemovals
	opts.Reference, opts.Phase = o.Reference, o.Phase
	opts.Manifest = manifestPath
	check := newGateRun(cfg)
	opts.Gate = check.hook
	defer check.wait()
	res, err := gen.Build(ctx, opts)
	if errors.Is(err, gen.ErrTooManyRemovals) {
		return nil, fmt.Errorf("%w; nothing was written", err)
	}
	if err != nil {
		return nil, err
	}
	if res.Manifest != nil && !res.UpToDate {
		check.seal(res.Manifest.ID)
	}
	if !res.UpToDate {
		// What the release adds to its parent, for the push that follows: it then reads
		// neither manifest. A record that cannot be written costs that push time only.
		_ = publish.WriteBuildRecord(opts.CacheDir, res.Manifest, res.Parent, res.Encoded)
	}
	if res.UpToDate && (o.Parent != nil || o.FromActive) {
		// The tree holds the parent; so must the manifest.
		if err := atomicfile.WriteFile(manifestPath, mustMarshal(res.Manifest), 0o644); err != nil {
			return nil, err
		}
	}

	out := &buildResult{
		Manifest: manifestPath, Tree: opts.TreeDir, UpToDate: res.UpToDate,
		Stats: res.Stats, Elapsed: time.Since(start).Seconds(), m: res.Manifest,
		Check: check.reports, checkNotes: check.notes, Warnings: keyWarnings,
	}
	if res.Manifest != nil {
		out.Release, out.Parent = res.Manifest.ID, res.Manifest.Parent
	}
	if !res.UpToDate {
		out.Changes = manifest.Diff(res.Parent, res.Manifest)
	}
	if out.Changes == nil {
		out.Changes = []manifest.Change{}
	}
	if o.Reproducible && !res.UpToDate {
		if out.Reproduced, err = verifyReproducible(ctx, cfg, st, res); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// verifyReproducible builds the release res made again from its parent, as a fresh runner
// would (--verify-reproducible), and fails unless every file matches.
func verifyReproducible(ctx context.Context, cfg *config.File, st *lazyStore, res *gen.Result) (*rebuildReport, error) {
	if res.Parent != nil && res.Manifest.Parent != res.Parent.ID {
		return nil, fmt.Errorf("--verify-reproducible: release %s takes the changes of release %s, built here and never recorded: push that first, or run armor rebuild with the parent's manifest", short(res.Manifest.ID), short(res.Parent.ID))
	}
	rep, err := rebuild(ctx, cfg, st, res.Manifest, res.Encoded, res.Parent)
	if err != nil {
		return nil, err
	}
	if !rep.Matches {
		var b strings.Builder
		writeRebuild(&b, rep)
		return nil, fmt.Errorf("--verify-reproducible: %s", b.String())
	}
	return rep, nil
}

// mustMarshal encodes a manifest that was parsed or built, and so encodes.
func mustMarshal(m *manifest.Manifest) []byte {
	data, err := manifest.Marshal(m)
	if err != nil {
		panic(err)
	}
	return data
}

// lazyStore opens armor.toml's store the first time a build needs it: only a build
// whose tree lacks its parent's files does.
type lazyStore struct {
	cfg  *config.File
	once sync.Once
	s    store.Store
	err  error
}

func (l *lazyStore) open(ctx context.Context) (store.Store, error) {
	l.once.Do(func() {
		if l.s != nil {
			return
		}
		l.s, l.err = publish.OpenStore(ctx, l.cfg.Remote())
		if errors.Is(l.err, publish.ErrNoStore) {
			l.err = fmt.Errorf("the tree lacks files of the parent release, and %s names no store to fetch them from: set [store], or build where the tree is", l.cfg.Path)
		}
	})
	return l.s, l.err
}

func (l *lazyStore) fetch(ctx context.Context, sum string, size int64) ([]byte, error) {
	s, err := l.open(ctx)
	if err != nil {
		return nil, err
	}
	return publish.FetchSized(ctx, s, sum, size)
}

// read is fetch without the digest check, for gen.Options.Fetch: the build checks every
// object it fetches against the manifest, and a second hash of the parent's indexes
// (tens of megabytes on a fresh runner) would be spent on its critical path.
func (l *lazyStore) read(ctx context.Context, sum string, size int64) ([]byte, error) {
	s, err := l.open(ctx)
	if err != nil {
		return nil, err
	}
	return publish.ReadSized(ctx, s, sum, size)
}

// activeParent returns controld's active release of the repository, to build on.
func activeParent(ctx context.Context, cfg *config.File, f ControldFlags, st *lazyStore) (*manifest.Manifest, error) {
	url := f.url(cfg)
	if url == "" {
		return nil, fmt.Errorf("--from-active: no controld: set [controld] url in %s, $ARMOR_CONTROLD_URL or --controld URL", cfg.Path)
	}
	c, err := readClient(cfg, url, f.CACert)
	if err != nil {
		return nil, err
	}
	s, err := st.open(ctx)
	if err != nil {
		return nil, err
	}
	m, err := publish.ActiveManifest(ctx, c, s, cfg.Repository.Name)
	if err != nil {
		return nil, fmt.Errorf("--from-active: %w", err)
	}
	return m, nil
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
		LinkPool:    cfg.Output.PoolFiles == "link",
		Hash:        signHash(cfg),
	}
	for _, s := range cfg.Suites {
		gs := gen.Suite{
			Suite: s.Suite, Codename: s.Codename, Description: s.Description,
			Components: s.Components, Architectures: s.Architectures, Inputs: s.Inputs,
			AllowEmpty: s.AllowEmpty, Sync: s.Sync, KeepVersions: s.KeepVersions,
			NotAutomatic: s.NotAutomatic, ButAutomaticUpgrades: s.ButAutomaticUpgrades,
		}
		share, err := s.RemovalShare()
		if err != nil {
			return o, err
		}
		gs.MaxRemovals = share
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
	for _, msg := range r.Warnings {
		fmt.Fprintf(g.stderr, "armor: warning: %s\n", msg)
	}
	if r.UpToDate {
		fmt.Fprintf(w, "up to date: release %s, %d packages (%d inputs checked, %.2fs)\n", short(r.Release), s.Packages, s.Inputs, r.Elapsed)
		return nil
	}
	fmt.Fprintf(w, "built release %s", short(r.Release))
	if r.Parent != "" {
		fmt.Fprintf(w, " (parent %s)", short(r.Parent))
	}
	fmt.Fprintf(w, " in %.2fs\n", r.Elapsed)
	if r.Parent == "" {
		fmt.Fprintf(w, "  a first release: no manifest to build on (armor build --from-active builds on the release controld serves)\n")
	}
	fmt.Fprintf(w, "  packages: %d (%d added or changed, %d removed", s.Packages, s.Added, s.Removed)
	if s.Copied > 0 {
		fmt.Fprintf(w, ", %d copied", s.Copied)
	}
	if s.Pruned > 0 {
		fmt.Fprintf(w, ", %d pruned by keep_versions", s.Pruned)
	}
	fmt.Fprintf(w, "); inputs: %d (%d read)\n", s.Inputs, s.Read)
	printChangeList(w, r.Changes)
	fmt.Fprintf(w, "  indexes rewritten: %d; suites signed: %d; files written: %d (%s)\n", s.IndexesWritten, s.SuitesSigned, s.FilesWritten, humanBytes(s.BytesWritten))
	fmt.Fprintf(w, "  tree: %s\n  manifest: %s\n", r.Tree, r.Manifest)
	printCheck(w, r.Check, r.checkNotes, "check: warning: ")
	if r.Reproduced != nil {
		fmt.Fprint(w, "  ")
		writeRebuild(w, r.Reproduced)
	}
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

// printChangeList prints what a build changed, the first few dozen lines of it.
func printChangeList(w io.Writer, changes []manifest.Change) {
	const most = 40
	if len(changes) == 0 {
		return
	}
	printChanges(w, changes[:min(len(changes), most)])
	if len(changes) > most {
		fmt.Fprintf(w, "  ... and %d more (armor diff)\n", len(changes)-most)
	}
}

// readClient is a client of the controld at url with armor.toml's token, which may be
// empty where controld lets anyone read.
func readClient(cfg *config.File, url, caCert string) (*client.Client, error) {
	token, err := cfg.Token()
	if err != nil {
		return nil, err
	}
	hc, err := httpClient(caCert)
	if err != nil {
		return nil, err
	}
	return client.New(url, token, hc), nil
}
