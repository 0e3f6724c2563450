package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/armor-apt/armor/cli/config"
	"github.com/armor-apt/armor/gate"
	"github.com/armor-apt/armor/gate/base"
	"github.com/armor-apt/armor/gen"
	"github.com/armor-apt/armor/internal/atomicfile"
	"github.com/armor-apt/armor/manifest"
)

// ErrRefused marks a build the installability check refused.
var ErrRefused = errors.New("the check refused the release")

// gateRun is the installability check of one build: the hook the build calls, and what
// it found, for the build's output.
type gateRun struct {
	cfg     *config.File
	cache   string            // the file keeping the packages checked last, by digest
	stamp   string            // this armor's, for the snapshots it keeps (see gatekept.go)
	bg      sync.WaitGroup    // the caches being written
	sealers []func(id string) // what seal keeps, given the release's ID
	kept    []string          // the suites checked from what the build before kept
	loader  *base.Loader
	reports []checkReport
	notes   []string // warnings about bases (a kept copy served)
}

// checkReport is what the check found in a suite, as the build prints it.
type checkReport struct {
	Suite    string              `json:"suite"`
	Policy   string              `json:"policy"`
	Checked  int                 `json:"checked"`
	Broken   []checkFinding      `json:"broken"`
	External map[string][]string `json:"external,omitempty"`
	report   *gate.Report
	kept     bool // checked from what the build before kept
}

type checkFinding struct {
	Package      string   `json:"package"`
	Version      string   `json:"version"`
	Architecture string   `json:"architecture"`
	In           string   `json:"in"`
	On           string   `json:"on"`
	Existing     bool     `json:"existing"`
	Reasons      []string `json:"reasons"`
}

func newGateRun(cfg *config.File) *gateRun {
	g := &gateRun{cfg: cfg, cache: filepath.Join(cfg.Resolve(cfg.Output.Cache), "gate-packages"), stamp: stamp()}
	g.loader = &base.Loader{Cache: filepath.Join(cfg.Resolve(cfg.Output.Cache), "base"), Warn: func(err error) { g.notes = append(g.notes, err.Error()) }}
	return g
}

// hook is gen.Options.Gate.
func (g *gateRun) hook(ctx context.Context, in *gen.GateInput) error {
	// By .deb digest: parent and release share most, and the last check kept them. Read
	// only for a suite that is not checked from what the last check kept.
	var parsed map[string]*gate.Package
	var refused []string
	var checked []*gate.Package
	defer func() { g.keep(checked) }()
	var added, removed map[int]bool // indexes in the release's and the parent's packages
	if in.Parent != nil {
		added, removed = changeIndexes(in.Parent.Packages, in.Packages)
	}
	for _, s := range g.cfg.Suites {
		policy := gate.Policy(s.CheckPolicy())
		if policy == gate.Off {
			continue
		}
		if len(s.Base) == 0 {
			rep, ok, err := g.keptCheck(ctx, s, in, added, removed)
			if err != nil {
				return err
			}
			if ok {
				g.kept = append(g.kept, s.Codename)
				g.reports = append(g.reports, rep)
				refused = append(refused, refusals(policy, rep)...)
				continue
			}
		}
		if parsed == nil {
			parsed = g.loadCache(len(in.Packages))
		}
		rel, relIdx, err := suitePackages(in.Packages, s.Codename, in.Stanza, parsed)
		if err != nil {
			return err
		}
		if len(s.Base) > 0 {
			// A suite without a base keeps a snapshot instead (see gatekept.go).
			for i := range rel {
				checked = append(checked, parsed[rel[i].SHA256])
			}
		}
		gs := &gate.Suite{Codename: s.Codename, Architectures: s.Architectures, Release: rel}
		if in.Parent != nil {
			gs.Added = []int{}
			for k, i := range relIdx {
				if added[i] {
					gs.Added = append(gs.Added, k)
				}
			}
			for i := range in.Parent.Packages {
				if !removed[i] {
					continue
				}
				gp, ok, err := gatePackage(&in.Parent.Packages[i], s.Codename, in.Stanza, parsed)
				if err != nil {
					return err
				}
				if ok {
					gs.Removed = append(gs.Removed, gp)
				}
			}
			// The parent's packages, only if a finding needs to know whether it had it.
			gs.LoadParent = func() []gate.Package {
				par, _, _ := suitePackages(in.Parent.Packages, s.Codename, in.Stanza, parsed)
				return par
			}
		}
		rep, err := g.check(ctx, s, gs)
		if err != nil {
			return err
		}
		g.reports = append(g.reports, rep)
		no := refusals(policy, rep)
		if len(s.Base) == 0 && len(no) == 0 {
			g.keepSnapshot(s, rel)
		}
		refused = append(refused, no...)
	}
	if len(refused) > 0 {
		return fmt.Errorf("%w: %d package checks fail, and nothing was written:\n  %s\n(fix the packages, or set check = \"warn\" on the suite in %s to publish anyway)",
			ErrRefused, len(refused), strings.Join(refused, "\n  "), g.cfg.Path)
	}
	return nil
}

// refusals returns the findings that refuse the release.
func refusals(policy gate.Policy, rep checkReport) []string {
	var out []string
	if policy == gate.Refuse {
		for _, f := range rep.report.New() {
			out = append(out, f.String())
		}
	}
	return out
}

// loadCache returns the packages the last check kept, by digest; none if it kept none
// or they do not decode.
func (g *gateRun) loadCache(n int) map[string]*gate.Package {
	if data, err := os.ReadFile(g.cache); err == nil {
		if m, err := gate.DecodePackages(data); err == nil {
			return m
		}
	}
	return make(map[string]*gate.Package, n)
}

// keep writes the packages checked to the cache, in the background: the build goes on,
// and wait waits for it. A cache that cannot be written costs the next check time only.
func (g *gateRun) keep(pkgs []*gate.Package) {
	if len(pkgs) == 0 {
		return
	}
	g.background(func() { _ = atomicfile.WriteFileUnsynced(g.cache, gate.EncodePackages(pkgs), 0o644) })
}

// background runs a write of a cache while the build goes on; wait waits for it.
func (g *gateRun) background(write func()) {
	g.bg.Add(1)
	go func() {
		defer g.bg.Done()
		write()
	}()
}

// wait waits for the caches to be written.
func (g *gateRun) wait() { g.bg.Wait() }

// changeIndexes compares two package lists in canonical order and returns the indexes in
// cur of the packages parent does not list as they are, and the indexes in parent of the
// packages cur does not list.
func changeIndexes(parent, cur []manifest.Package) (added, removed map[int]bool) {
	added, removed = map[int]bool{}, map[int]bool{}
	i, j := 0, 0
	for i < len(parent) || j < len(cur) {
		c := 0
		switch {
		case i == len(parent):
			c = 1
		case j == len(cur):
			c = -1
		default:
			c = manifest.CompareKeys(&parent[i], &cur[j])
		}
		switch {
		case c < 0:
			removed[i] = true
			i++
		case c > 0:
			added[j] = true
			j++
		default:
			if parent[i].SHA256 != cur[j].SHA256 {
				removed[i], added[j] = true, true
			}
			i++
			j++
		}
	}
	return added, removed
}

// check checks one suite, with its bases.
func (g *gateRun) check(ctx context.Context, s config.Suite, gs *gate.Suite) (checkReport, error) {
	gs.HasBase = len(s.Base) > 0
	if gs.HasBase {
		gs.Base = map[string][]gate.Package{}
		for _, spec := range s.Base {
			src, err := base.Parse(spec, g.cfg.Dir())
			if err != nil {
				return checkReport{}, fmt.Errorf("suite %s: %w", s.Codename, err)
			}
			for _, arch := range s.Architectures {
				pkgs, err := g.loader.Load(ctx, src, arch)
				if err != nil {
					return checkReport{}, fmt.Errorf("suite %s: %w", s.Codename, err)
				}
				gs.Base[arch] = append(gs.Base[arch], pkgs...)
			}
		}
	}
	rep, err := gate.Check(ctx, gs)
	if err != nil {
		return checkReport{}, fmt.Errorf("suite %s: %w", s.Codename, err)
	}
	return reportOf(s, rep), nil
}

// suitePackages reads the binary packages of a suite (not the installer's .udeb) from
// their stanzas, or from parsed (by digest), which keeps what it reads. It returns,
// beside them, the index in pkgs of each. The stanzas are parsed on every core: on a
// fresh runner, whose cache kept no snapshot, that is every package of the release.
func suitePackages(pkgs []manifest.Package, suite string, stanza func(*manifest.Package) ([]byte, error), parsed map[string]*gate.Package) ([]gate.Package, []int, error) {
	var idx []int
	for i := range pkgs {
		if suiteBinary(&pkgs[i], suite) {
			idx = append(idx, i)
		}
	}
	out := make([]gate.Package, len(idx))
	var todo []int // of out, those parsed here
	for k, i := range idx {
		if gp := parsed[pkgs[i].SHA256]; gp != nil {
			out[k] = *gp
		} else {
			todo = append(todo, k)
		}
	}
	err := parseEach(len(todo), func(j int) (err error) {
		k := todo[j]
		out[k], err = parsePackage(&pkgs[idx[k]], stanza)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	// parsed keeps what was read here where it lies, in out: the check changes nothing of
	// a package but what it caches of it (depFields), and From, which every reader of
	// parsed sets for itself. A second copy would be 27 MB at 100,000 packages.
	for _, k := range todo {
		if sum := pkgs[idx[k]].SHA256; parsed[sum] == nil {
			parsed[sum] = &out[k]
		}
	}
	from := ""
	for k, i := range idx {
		from = fromOf(from, &pkgs[i])
		out[k].From = from
	}
	return out, idx, nil
}

// gatePackage returns p as the check reads it, if it is a binary package of the suite.
func gatePackage(p *manifest.Package, suite string, stanza func(*manifest.Package) ([]byte, error), parsed map[string]*gate.Package) (gate.Package, bool, error) {
	if !suiteBinary(p, suite) {
		return gate.Package{}, false, nil
	}
	gp := parsed[p.SHA256]
	if gp == nil {
		pkg, err := parsePackage(p, stanza)
		if err != nil {
			return gate.Package{}, false, err
		}
		gp = &pkg
		parsed[p.SHA256] = gp
	}
	q := *gp
	q.From = fromOf("", p)
	return q, true, nil
}

// parsePackage reads p from its stanza.
func parsePackage(p *manifest.Package, stanza func(*manifest.Package) ([]byte, error)) (gate.Package, error) {
	st, err := stanza(p)
	if err != nil {
		return gate.Package{}, fmt.Errorf("check: %w", err)
	}
	pkg, err := gate.ParseStanza(st)
	if err != nil {
		return gate.Package{}, fmt.Errorf("check: %s: %w", p.Path, err)
	}
	pkg.SHA256 = p.SHA256
	return pkg, nil
}

// fromOf returns where p is listed, for reports: "suite/component"; last, when it says
// that already, so that the packages of one component share one string.
func fromOf(last string, p *manifest.Package) string {
	if n := len(p.Suite); len(last) == n+1+len(p.Component) && last[:n] == p.Suite && last[n] == '/' && last[n+1:] == p.Component {
		return last
	}
	return p.Suite + "/" + p.Component
}

// parseEach calls parse(0), ..., parse(n-1) on every core, each core a run of them in
// order, and returns the error of the lowest j for which parse failed, as a loop would.
func parseEach(n int, parse func(j int) error) error {
	w := min(runtime.GOMAXPROCS(0), max(1, n/512))
	errs := make([]error, w) // the first of each run
	var wg sync.WaitGroup
	for b := range w {
		wg.Go(func() {
			for j := b * n / w; j < (b+1)*n/w; j++ {
				if errs[b] = parse(j); errs[b] != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	return cmp.Or(errs...)
}

// printCheck prints what the check found that the build's output should say: packages
// that cannot be installed (the refused ones were the build's error), names taken from
// outside, and bases served from a kept copy.
// label heads each finding: "check: warning: " in a build's output.
func printCheck(w io.Writer, reports []checkReport, notes []string, label string) {
	for _, n := range notes {
		fmt.Fprintf(w, "  check: warning: %s\n", n)
	}
	for _, r := range reports {
		for _, f := range r.report.Broken {
			fmt.Fprintf(w, "  %s%s\n", label, strings.ReplaceAll(f.String(), "\n", "\n  "))
		}
		if len(r.External) > 0 {
			var names []string
			for n := range r.External {
				names = append(names, n)
			}
			slices.Sort(names)
			fmt.Fprintf(w, "  check: %s: %d names outside the repository are taken as met (%s); name a base in %s to check them\n",
				r.Suite, len(names), strings.Join(firstN(names, 8), ", "), "armor.toml")
		}
	}
}

func firstN(s []string, n int) []string {
	if len(s) <= n {
		return s
	}
	return append(s[:n:n], fmt.Sprintf("and %d more", len(s)-n))
}
