package cli_test

// The year test runs configs/ci's recipes as written: the run:/script: steps of each job
// of github-actions.yml and gitlab-ci.yml, extracted from the YAML and run with bash in a
// new empty directory that holds only what the distributor commits (armor.toml, keys/,
// .gitignore, the Makefile of their own build, and the manifest.toml they once
// committed), with the secrets in the environment. `go install` is the one step that
// cannot run here (no module proxy serves armor): a `go` on PATH checks its arguments
// and installs the armor under test. About fifty publish pipelines, a few changes by
// hand and a gc every Sunday, over the 52 weeks that ended a week ago, each dated in
// them by SOURCE_DATE_EPOCH (see clock): plain additions, two at once, a sync suite with
// keep_versions, a copy to stable, a rollback while a manifest is committed, a phased
// update, a change of keys done as README says, and a refusal by design whose named
// command then runs on a fresh runner. Meanwhile a mirror follows with debmirror,
// another with wget -N -m, each through a proxy that counts the bytes it fetches, and an
// apt client that installed the keyring package by following the page upgrades through
// the edge.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/armor-apt/armor/controld/api"
	"github.com/armor-apt/armor/debian/sign"
	"github.com/armor-apt/armor/internal/testkit/apttest"
	"github.com/armor-apt/armor/internal/testkit/synth"
	"github.com/armor-apt/armor/manifest"
	"github.com/armor-apt/armor/publish"
)

// ciJob is one job of a recipe: its shell steps in order and the environment it sets
// (values may hold ${{ secrets.X }} or $X, expanded when it runs).
type ciJob struct {
	steps []string
	env   map[string]string
	// secrets: every secret is in the job's environment (GitLab's CI/CD variables);
	// otherwise only those env maps (GitHub's ${{ secrets.X }}).
	secrets bool
	kind    string // publish, change or gc: what the year counts
}

// githubJobs reads the jobs of a GitHub Actions workflow: each step's run:, with the
// workflow's, the job's and the step's env.
func githubJobs(t *testing.T, path string) map[string]ciJob {
	t.Helper()
	var wf struct {
		Env  map[string]string `yaml:"env"`
		Jobs map[string]struct {
			Env   map[string]string `yaml:"env"`
			Steps []struct {
				Run string            `yaml:"run"`
				Env map[string]string `yaml:"env"`
			} `yaml:"steps"`
		} `yaml:"jobs"`
	}
	if err := yaml.Unmarshal(readFileT(t, path), &wf); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	out := map[string]ciJob{}
	for name, j := range wf.Jobs {
		job := ciJob{env: map[string]string{}}
		for _, m := range []map[string]string{wf.Env, j.Env} {
			for k, v := range m {
				job.env[k] = v
			}
		}
		for _, s := range j.Steps {
			if s.Run == "" {
				continue
			}
			step := s.Run
			for k, v := range s.Env {
				step = fmt.Sprintf("export %s=%q\n%s", k, v, step) // expanded below, before bash
			}
			job.steps = append(job.steps, step)
		}
		out[name] = job
	}
	return out
}

// gitlabJobs reads the jobs of a .gitlab-ci.yml: before_script (the job's, else the
// default's) then script, with the job's variables.
func gitlabJobs(t *testing.T, path string) map[string]ciJob {
	t.Helper()
	var raw map[string]yaml.Node
	if err := yaml.Unmarshal(readFileT(t, path), &raw); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	type job struct {
		BeforeScript *[]string         `yaml:"before_script"`
		Script       []string          `yaml:"script"`
		Variables    map[string]string `yaml:"variables"`
	}
	var def job
	if n, ok := raw["default"]; ok {
		if err := n.Decode(&def); err != nil {
			t.Fatal(err)
		}
	}
	out := map[string]ciJob{}
	for name, n := range raw {
		if name == "default" || name == "stages" {
			continue
		}
		var j job
		if err := n.Decode(&j); err != nil {
			t.Fatalf("%s: job %s: %v", path, name, err)
		}
		before := def.BeforeScript
		if j.BeforeScript != nil {
			before = j.BeforeScript
		}
		steps := slices.Clone(j.Script)
		if before != nil {
			steps = append(slices.Clone(*before), steps...)
		}
		out[name] = ciJob{steps: steps, env: j.Variables, secrets: true}
	}
	return out
}

var ghExpr = regexp.MustCompile(`\$\{\{\s*(secrets|inputs)\.([A-Za-z_0-9]+)\s*\}\}`)

// clock is the simulated year: the 52 weeks that ended a week ago. What armor writes is
// dated by SOURCE_DATE_EPOCH in that past, so the real clocks that judge it (controld's
// Valid-Until check, gpgv's and apt's signature and Date checks) are never behind it.
type clock struct{ day0 time.Time }

func newClock() clock {
	return clock{day0: time.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, -7*53)}
}

// at is day (0 = Monday) of week (1-52), at hour:minute.
func (c clock) at(week, day, hour, minute int) time.Time {
	return c.day0.AddDate(0, 0, 7*(week-1)+day).Add(time.Duration(hour)*time.Hour + time.Duration(minute)*time.Minute)
}

// world is the distributor's side of the year: the laptop (the project directory, with
// the secret keys and an admin token), what is committed, the CI secrets and the
// runner's tools.
type world struct {
	t            *testing.T
	c            *cluster
	ws           *project
	secrets      map[string]string
	shim         string // a directory with the go shim
	sysPath      string
	date         time.Time // the simulated now, SOURCE_DATE_EPOCH of what runs
	keyringDeb   string    // the keyring package the distributor's build makes now
	lastFollowed *manifest.Manifest
	pipelines    atomic.Int32
	kinds        map[string]int // pipelines by kind (publish, change, gc)
	needed       atomic.Int32   // pipelines that failed: a person would have had to step in
	refused      atomic.Int32   // refusals by design, each followed by the command it named
	mu           sync.Mutex
	spent        map[string]time.Duration // wall time by step or tool, for the profile
}

// spend adds d to what label took.
func (w *world) spend(label string, d time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.spent == nil {
		w.spent = map[string]time.Duration{}
	}
	w.spent[label] += d
}

// timed runs f and adds its wall time to label.
func (w *world) timed(label string, f func()) {
	start := time.Now()
	f()
	w.spend(label, time.Since(start))
}

// profile is where the wall time went, largest first.
func (w *world) profile() string {
	var labels []string
	for l := range w.spent {
		labels = append(labels, l)
	}
	slices.SortFunc(labels, func(a, b string) int { return int(w.spent[b] - w.spent[a]) })
	var b strings.Builder
	for _, l := range labels {
		fmt.Fprintf(&b, "\n  %6.1fs  %s", w.spent[l].Seconds(), l)
	}
	return b.String()
}

// committedFiles are what the distributor's repository holds (the runner's checkout).
var committedFiles = []string{"armor.toml", ".gitignore", "Makefile", "manifest.toml",
	"keys/acme-archive-keyring.gpg", "keys/acme-archive-keyring.asc"}

// commit copies the laptop's committed files into the repository the runners check out.
func (w *world) commit(t *testing.T) {
	for _, f := range committedFiles {
		copyInto(t, filepath.Join(w.ws.dir, f), filepath.Join(w.ws.dir, "committed", f))
	}
}

func copyInto(t *testing.T, src, dst string) {
	t.Helper()
	data := readFileT(t, src)
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// checkout makes a runner's directory: only what the distributor committed.
func (w *world) checkout(t *testing.T) string {
	dir := t.TempDir()
	for _, f := range committedFiles {
		copyInto(t, filepath.Join(w.ws.dir, "committed", f), filepath.Join(dir, f))
	}
	return dir
}

// laptop runs armor in the project directory, as the distributor does by hand, dated now
// (simulated), with the admin token.
func (w *world) laptop(t *testing.T, args ...string) string {
	t.Helper()
	return armor(t, w.ws.dir, append(w.c.env(), "SOURCE_DATE_EPOCH="+fmt.Sprint(w.date.Unix())), args...)
}

// run runs one job of a recipe in a fresh checkout, with the debs its build makes (stable
// and testing directories of .deb files) and the inputs of a manual pipeline. It returns
// what the job printed and the error of the step that failed, if one did.
func (w *world) run(t *testing.T, job ciJob, debs map[string][]string, inputs map[string]string) (string, error) {
	dir := w.checkout(t)
	build := t.TempDir()
	for suite, files := range debs {
		for _, f := range files {
			copyInto(t, f, filepath.Join(build, suite, filepath.Base(f)))
		}
	}
	bin := t.TempDir()
	expand := func(s string) string {
		s = ghExpr.ReplaceAllStringFunc(s, func(m string) string {
			g := ghExpr.FindStringSubmatch(m)
			if g[1] == "inputs" {
				return inputs[g[2]]
			}
			return w.secrets[g[2]] // a secret not set expands to nothing, as on GitHub
		})
		return os.Expand(s, func(k string) string {
			if v, ok := w.secrets[k]; ok {
				return v
			}
			return "$" + k // a runtime variable of the step's own shell
		})
	}
	env := []string{"PATH=" + bin + ":" + w.shim + ":" + w.sysPath, "HOME=" + t.TempDir(), "GOBIN=" + bin,
		"ARMOR_BIN=" + armorBin, "PIPELINE_BUILD=" + build, "CI=true",
		"SOURCE_DATE_EPOCH=" + fmt.Sprint(w.date.Unix()), "CI_COMMIT_BRANCH=main", "CI_DEFAULT_BRANCH=main"}
	for k, v := range inputs {
		env = append(env, k+"="+v)
	}
	if job.secrets {
		for k, v := range w.secrets {
			env = append(env, k+"="+v)
		}
	}
	for k, v := range job.env {
		env = append(env, k+"="+expand(v))
	}
	var out bytes.Buffer
	for _, step := range job.steps {
		cmd := exec.Command("bash", "-e", "-c", expand(step))
		cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = dir, env, &out, &out
		start := time.Now()
		err := cmd.Run()
		label, _, _ := strings.Cut(strings.TrimSpace(step), "\n")
		w.spend("step: "+strings.Join(strings.Fields(label)[:min(3, len(strings.Fields(label)))], " "), time.Since(start))
		if err != nil {
			return out.String(), fmt.Errorf("step %q: %w", step, err)
		}
	}
	return out.String(), nil
}

// pipeline runs a job that must succeed: a failure is a pipeline a person had to rescue.
func (w *world) pipeline(t *testing.T, job ciJob, debs map[string][]string, inputs map[string]string) string {
	w.pipelines.Add(1)
	w.mu.Lock()
	if w.kinds == nil {
		w.kinds = map[string]int{}
	}
	w.kinds[job.kind]++
	w.mu.Unlock()
	out, err := w.run(t, job, debs, inputs)
	if err != nil {
		w.needed.Add(1)
		t.Errorf("%s: pipeline failed: %v\noutput:\n%s", w.date.Format(time.DateOnly), err, out)
	}
	return out
}

// recipe is one CI system's jobs.
type recipe struct {
	name                string
	publish, change, gc ciJob
	install             string // the step that installs armor
}

// countingProxy forwards to the edge and counts the body bytes its client fetched.
type countingProxy struct {
	addr  string
	bytes atomic.Int64
}

type countBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b countBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

func startProxy(t *testing.T, edge string) *countingProxy {
	p := &countingProxy{}
	target, _ := url.Parse("http://" + edge)
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			host := r.In.Host
			r.SetURL(target)
			r.Out.Host = host
		},
		ModifyResponse: func(resp *http.Response) error {
			resp.Body = countBody{resp.Body, &p.bytes}
			return nil
		},
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: rp}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	p.addr = ln.Addr().String()
	return p
}

// yearKeys are the distributor's two signing keys, made ahead of the year (created before
// its first day, as Debian makes its archive keys months before they sign): the one the
// year starts with, and the one it rotates to.
func yearKeys(t *testing.T, created time.Time) (first, next *sign.Key, firstFile, nextFile string) {
	dir := t.TempDir()
	write := func(name string) (*sign.Key, string) {
		k, err := sign.Generate("acme archive signing key", "archive@acme.test", sign.EdDSA, created)
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if err := k.WriteSecret(&b, nil); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, b.Bytes(), 0o600); err != nil {
			t.Fatal(err)
		}
		return k, path
	}
	first, firstFile = write("2025.sec.asc")
	next, nextFile = write("2026.sec.asc")
	return first, next, firstFile, nextFile
}

// TestCIYear: see the top of this file. At the end no package was lost, no pipeline
// needed a person, the mirrors fetched what each change changed, not the repository, and
// the apt user who followed the page went through a change of keys by upgrading the
// keyring package.
func TestCIYear(t *testing.T) {
	for _, tool := range []string{"debmirror", "wget", "gpgv", "dpkg"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not found: run .ci/install-deps", tool)
		}
	}
	began := time.Now()
	recipes := readRecipes(t)
	clk := newClock()
	c := newCluster(t)
	// gc_grace of a second: the weekly gc collects for real (the year's objects are
	// seconds old by the real clock); no push is in flight while it runs.
	controldToml := filepath.Join(c.work, "controld.toml")
	if err := os.WriteFile(controldToml, []byte("gc_grace = \"1s\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c.controld.stop()
	c.controld = startProc(t, nil, filepath.Join(c.work, "controld-year.log"), "controld", "--config-file", controldToml,
		"--listen", c.controldAddr, "--data-dir", c.data, "--store", c.store)
	waitHTTP(t, "http://"+c.controldAddr+"/v1/healthz")

	keyA, keyB, keyAFile, keyBFile := yearKeys(t, clk.day0.AddDate(0, -1, 0))
	w := &world{t: t, c: c, sysPath: os.Getenv("PATH"), date: clk.at(1, 0, 9, 0).AddDate(0, 0, -1)}
	w.spend("cluster: controld, edged, tokens", time.Since(began))
	w.timed("laptop: init, key import, first build and push", func() { w.setUp(t, keyAFile) })

	made := t.TempDir()
	deb := func(name, version string) string {
		f, err := synth.WriteOne(made, name, version, "amd64", "")
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	testingSet := func(week int) []string { // a sync suite: every file, each build
		var fs []string
		for i := 1; i <= 1+week/4; i++ {
			fs = append(fs, deb("libt", fmt.Sprintf("1.%d", i))) // every version built: retention prunes
		}
		for i := 0; i < 11; i++ {
			fs = append(fs, deb(fmt.Sprintf("libt%02d", i), "1.0"))
		}
		return fs
	}

	proxy, wgetProxy, debmirrorProxy := startProxy(t, c.edge), startProxy(t, c.edge), startProxy(t, c.edge)
	var user *aptUser
	wgetDir, debmirrorDir := t.TempDir(), t.TempDir()
	var syncs []mirrorSync
	var followTime time.Duration
	follow := func(week int) {
		start := time.Now()
		m := w.active(t)
		waitServedRelease(t, c, w.ws.host, m)
		before := [2]int64{wgetProxy.bytes.Load(), debmirrorProxy.bytes.Load()}
		w.timed("wget -N -m", func() { w.wgetMirror(t, wgetProxy, wgetDir) })
		w.timed("debmirror", func() { w.debmirror(t, debmirrorProxy, debmirrorDir) })
		syncs = append(syncs, mirrorSync{week, wgetProxy.bytes.Load() - before[0], debmirrorProxy.bytes.Load() - before[1],
			changedBytes(t, w.lastFollowed, m), repoBytes(m)})
		w.lastFollowed = m
		w.timed("apt-get update, download, dpkg -i", func() { user.upgrade(t) })
		followTime += time.Since(start)
	}

	published := map[string]bool{} // name=version the distributor published to stable
	rolledBack := "hello=1.20-1"
	gcDeleted := 0
	for week := 1; week <= 52; week++ {
		w.date = clk.at(week, 0, 10, 0) // Mondays at ten
		r := recipes[week%2]
		var stable []string
		switch week {
		case 1:
			for _, n := range []string{"hello", "acme-tools", "acme-docs"} {
				stable = append(stable, deb(n, "1.0-1"))
				published[n+"=1.0-1"] = true
			}
			// The bulk of the repository, published once: what a mirror must not fetch again.
			stable = append(stable, bigDeb(t, made, "acme-data", "2026.1-1", 3<<20))
			published["acme-data=2026.1-1"] = true
		case 48:
		default:
			v := fmt.Sprintf("1.%d-1", week)
			stable = append(stable, deb("hello", v))
			published["hello="+v] = true
		}
		// The distributor's build makes the keyring package each time, and every file of
		// the sync suite (the recipes say so): a new version of libt every four weeks.
		debs := map[string][]string{"stable": append(stable, w.keyringDeb), "testing": testingSet(week)}
		switch week {
		case 48:
			// A runner whose build left only the new file of the sync suite: refused by
			// design, naming the command that publishes it; that command, run as named on
			// a fresh runner, does.
			w.refusal(t, r, map[string][]string{"testing": {deb("libt", "1.13")}},
				"armor add FILE... --suite testing --from-active", "armor add debs/testing/libt_1.13_amd64.deb --suite testing --from-active")
		case 10, 30: // two pipelines at once, one from each recipe
			v := fmt.Sprintf("%d.0", week)
			other := map[string][]string{"stable": {deb("acme-extra", v), w.keyringDeb}, "testing": debs["testing"]}
			published["acme-extra="+v] = true
			var wg sync.WaitGroup
			wg.Add(2)
			go func() { defer wg.Done(); w.pipeline(t, r.publish, debs, nil) }()
			go func() { defer wg.Done(); w.pipeline(t, recipes[1-week%2].publish, other, nil) }()
			wg.Wait()
		case 42: // after --finish the old ARMOR_NEXT_SIGNING_KEY is still set: harmless
			out := w.pipeline(t, r.publish, debs, nil)
			if !strings.Contains(out, "warning: $ARMOR_NEXT_SIGNING_KEY holds the signing key "+keyB.Fingerprint()) {
				t.Errorf("week 42: the leftover ARMOR_NEXT_SIGNING_KEY gave no warning:\n%s", out)
			}
			delete(w.secrets, "ARMOR_NEXT_SIGNING_KEY") // as the warning says
		default:
			w.pipeline(t, r.publish, debs, nil)
		}
		if week == 1 {
			user = w.newUser(t, proxy)
		}
		w.date = clk.at(week, 1, 15, 0) // Tuesdays: what a person does
		switch week {
		case 20: // a rollback while a manifest is committed; the next pushes go on
			w.change(t, r, "armor rollback")
			delete(published, rolledBack)
			if d := releaseDate(t, w, w.active(t)); !d.Equal(w.date) {
				t.Errorf("the rollback's Release is dated %s, want SOURCE_DATE_EPOCH %s", d, w.date)
			}
		case 24:
			w.change(t, r, "armor copy libt --from testing --to stable")
			for _, p := range w.active(t).Packages {
				if p.Suite == "stable" && p.Name == "libt" {
					published["libt="+p.Version] = true
				}
			}
		case 26:
			w.change(t, r, "armor phase hello 1.26-1 50")
			phased := ""
			for _, p := range w.active(t).Packages {
				if p.Suite == "stable" && p.Name == "hello" && p.Version == "1.26-1" {
					phased = p.Phased
				}
			}
			if phased != "50" {
				t.Errorf("after armor phase hello 1.26-1 50 its Phased-Update-Percentage is %q", phased)
			}
		case 32:
			w.rotate(t, keyBFile)
		case 41:
			w.finishRotation(t)
		}
		w.date = clk.at(week, 6, 3, 17) // the schedule: Sundays at 03:17
		gcDeleted += w.gc(t, r)
		switch {
		case week == 40: // the user upgraded the keyring package: it holds the new key
			follow(week)
			if ok, _, _ := keyB.InKeyring(readFileT(t, user.keyring)); !ok {
				t.Errorf("week 40: the apt user's keyring lacks the new key %s after upgrading the keyring package", keyB.Fingerprint())
			}
		case week == 44: // signed by the new key alone, and the user's apt still updates
			follow(week)
			if by := signedBy(t, w); by != keyB.Fingerprint() {
				t.Errorf("week 44: Release's Signed-By is %q, want the new key %s alone", by, keyB.Fingerprint())
			}
		case week%8 == 0 || week == 52:
			follow(week)
		}
	}
	pipelineTime := time.Since(began) - followTime

	// 0 packages lost: every version published to stable, less the one rolled back, is
	// still there (stable keeps every version); the sync suite has the new libt.
	final := w.active(t)
	have := map[string]bool{}
	for _, p := range final.Packages {
		have[p.Suite+":"+p.Name+"="+p.Version] = true
	}
	var lost []string
	for k := range published {
		if !have["stable:"+k] {
			lost = append(lost, k)
		}
	}
	slices.Sort(lost)
	if len(lost) > 0 || have["stable:"+rolledBack] {
		t.Errorf("packages lost from stable: %v (%s, rolled back, listed: %v)", lost, rolledBack, have["stable:"+rolledBack])
	}
	if !have["testing:libt=1.13"] || !have["testing:libt00=1.0"] {
		t.Errorf("testing lacks libt 1.13 (added after the refusal) or libt00 1.0 (kept)")
	}
	if ok, _, _ := keyA.InKeyring(readFileT(t, user.keyring)); ok {
		t.Errorf("the apt user's keyring still holds the old key %s after upgrading past the end of the change of keys", keyA.Fingerprint())
	}
	if gcDeleted == 0 {
		t.Errorf("the weekly gc deleted nothing all year")
	}
	t.Logf("year: %d pipelines (%d publish, %d change, %d gc), %d needed a person, %d refused by design (the command named then ran); %d packages published to stable, %d lost; gc deleted %d objects",
		w.pipelines.Load(), w.kinds["publish"], w.kinds["change"], w.kinds["gc"], w.needed.Load(), w.refused.Load(), len(published), len(lost), gcDeleted)
	checkDates(t, w, clk)
	t.Logf("wall time: %s (pipelines and setup %s, mirrors and apt %s); by step:%s", time.Since(began).Round(time.Second),
		pipelineTime.Round(time.Second), followTime.Round(time.Second), w.profile())
	checkMirrors(t, syncs)
	if n := w.needed.Load(); n != 0 {
		t.Errorf("%d of %d pipelines needed a person", n, w.pipelines.Load())
	}
	if got := user.policy(t, "hello"); !strings.HasPrefix(got, "1.5") {
		t.Errorf("the apt user's candidate hello is %q after the year", got)
	}
}

// readRecipes reads both recipes' publish, change and gc jobs.
func readRecipes(t *testing.T) []recipe {
	gh := githubJobs(t, filepath.Join("..", "configs", "ci", "github-actions.yml"))
	gl := gitlabJobs(t, filepath.Join("..", "configs", "ci", "gitlab-ci.yml"))
	for _, name := range []string{"publish", "change", "gc"} {
		if _, ok := gh[name]; !ok {
			t.Fatalf("github-actions.yml has no job %s", name)
		}
		if _, ok := gl[name]; !ok {
			t.Fatalf("gitlab-ci.yml has no job %s", name)
		}
	}
	install := func(job ciJob) string {
		for _, s := range job.steps {
			if strings.Contains(s, "go install") {
				return s
			}
		}
		t.Fatalf("a publish job installs no armor: %q", job.steps)
		return ""
	}
	// GitLab's publish is its debs job (the build) and its publish job.
	glPublish := ciJob{steps: append(slices.Clone(gl["debs"].steps), gl["publish"].steps...), env: gl["publish"].env, secrets: true}
	rs := []recipe{
		{"github", gh["publish"], gh["change"], gh["gc"], install(gh["publish"])},
		{"gitlab", glPublish, gl["change"], gl["gc"], install(gl["publish"])},
	}
	for i := range rs {
		rs[i].publish.kind, rs[i].change.kind, rs[i].gc.kind = "publish", "change", "gc"
	}
	return rs
}

// mirrorSync is what the mirrors fetched at one follow, against what changed.
type mirrorSync struct {
	week                                int
	wget, debmirror, changed, repoBytes int64
}

// checkMirrors: after the first sync, each mirror fetched at most twice what changed
// plus 64 KiB (listings, the unchanged Release files' revalidations), and never a tenth
// of the repository.
func checkMirrors(t *testing.T, syncs []mirrorSync) {
	for _, s := range syncs[1:] {
		t.Logf("week %2d: the release changed by %d bytes in a repository of %d; wget -N -m fetched %d, debmirror %d",
			s.week, s.changed, s.repoBytes, s.wget, s.debmirror)
		limit := 2*s.changed + 64<<10
		if s.wget > limit || s.debmirror > limit || s.wget > s.repoBytes/10 || s.debmirror > s.repoBytes/10 {
			t.Errorf("week %d: the mirrors fetched %d (wget) and %d (debmirror) bytes for a change of %d bytes in a repository of %d",
				s.week, s.wget, s.debmirror, s.changed, s.repoBytes)
		}
	}
}

// bigDeb is a package of size bytes of incompressible data.
func bigDeb(t *testing.T, dir, name, version string, size int) string {
	data := make([]byte, size)
	rng := rand.New(rand.NewPCG(uint64(size), 7))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	control := fmt.Sprintf("Package: %s\nVersion: %s\nArchitecture: all\nMaintainer: Acme <archive@acme.test>\nInstalled-Size: %d\nSection: doc\nPriority: optional\nDescription: the bulk of the repository\n a large package published once, that mirrors must not fetch again\n",
		name, version, size/1024)
	var b bytes.Buffer
	if err := synth.Encode(&b, synth.Deb{Control: []byte(control), StoreData: true,
		Files: []synth.File{{Path: "usr/share/" + name + "/data", Data: data}}}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name+"_"+version+"_all.deb")
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// changedBytes is the size of what m serves that old did not (by path and digest).
func changedBytes(t *testing.T, old, m *manifest.Manifest) int64 {
	var n int64
	prev := map[string]string{}
	if old != nil {
		for p, o := range old.Paths() {
			prev[p] = o.SHA256
		}
	}
	for p, o := range m.Paths() {
		if prev[p] != o.SHA256 {
			n += o.Size
		}
	}
	return n
}

func repoBytes(m *manifest.Manifest) int64 {
	var n int64
	for _, p := range m.Paths() {
		n += p.Size
	}
	return n
}

// setUp lays out the laptop: armor init, the key made ahead imported and published in
// keys/, two suites (stable; testing, which mirrors its inputs, keeps two versions and
// carries Valid-Until), the Makefile of the distributor's own build, a first push, what
// is committed, and the CI secrets as README says.
func (w *world) setUp(t *testing.T, keyFile string) {
	c := w.c
	w.ws = &project{dir: filepath.Join(c.work, "acme"), name: "acme", host: "apt.acme.test"}
	armor(t, c.work, nil, "init", "--dir", w.ws.dir, "--name", "acme", "--hostname", w.ws.host,
		"--key-algo", "eddsa", "--store", c.store, "--controld", "http://"+c.controldAddr)
	w.laptop(t, "key", "import", "--force", keyFile)
	w.laptop(t, "key", "export", "--out", "keys/acme-archive-keyring")
	w.laptop(t, "repos", "create")
	cfgPath := filepath.Join(w.ws.dir, "armor.toml")
	cfg := string(readFileT(t, cfgPath))
	cfg = strings.Replace(cfg, `"main" = ["debs/**/*.deb"]`, `"main" = ["debs/stable/*.deb"]`, 1)
	cfg = strings.Replace(cfg, "[suite.inputs]", "allow_empty = true\n\n[suite.inputs]", 1)
	// Valid-Until on testing: 400 days, as the year's Releases are up to a year old by
	// the real clock that controld and apt judge them with.
	cfg = strings.Replace(cfg, "[signing]", `[[suite]]
codename = "testing"
components = ["main"]
architectures = ["amd64"]
sync = true
keep_versions = 2
allow_empty = true
valid_for = "400d"

[suite.inputs]
"main" = ["debs/testing/*.deb"]

[signing]`, 1)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	makefile := "# The distributor's own build: here it copies what the pipeline built.\ndebs:\n\tmkdir -p debs\n\tcp -R $(PIPELINE_BUILD)/. debs/\n"
	if err := os.WriteFile(filepath.Join(w.ws.dir, "Makefile"), []byte(makefile), 0o644); err != nil {
		t.Fatal(err)
	}
	w.keyringDeb = w.keyringPackage(t)
	w.laptop(t, "build")
	w.ws.push(t, c)
	w.commit(t)
	w.secrets = map[string]string{"ARMOR_SIGNING_KEY": string(readFileT(t, filepath.Join(w.ws.dir, ".armor", "keys", "signing.sec.asc"))),
		"ARMOR_TOKEN": c.admin, "ARMOR_ADMIN_TOKEN": c.admin}
	// The runner's go: the recipes' install step, checked, then the armor under test.
	w.shim = t.TempDir()
	shim := `#!/bin/sh
case "$*" in
"install -tags allbackends github.com/armor-apt/armor/cli/armor@latest") ln -sf "$ARMOR_BIN" "$GOBIN/armor" ;;
*) echo "go shim: the recipe ran go $*, not the install of every backend" >&2; exit 1 ;;
esac
`
	if err := os.WriteFile(filepath.Join(w.shim, "go"), []byte(shim), 0o755); err != nil {
		t.Fatal(err)
	}
}

// keyringPackage builds the keyring package of the laptop's keys/, versioned by the date.
func (w *world) keyringPackage(t *testing.T) string {
	out := filepath.Join(t.TempDir(), "kp")
	w.laptop(t, "key", "package", "--out", out)
	files, err := filepath.Glob(filepath.Join(out, "acme-archive-keyring_*_all.deb"))
	if err != nil || len(files) != 1 {
		t.Fatalf("armor key package made %v (%v)", files, err)
	}
	return files[0]
}

// rotate starts a change of keys as README says: armor key rotate on the laptop (the
// new key made ahead), commit armor.toml and keys/, the new key in the CI secret
// ARMOR_NEXT_SIGNING_KEY, and the keyring package again in the build.
func (w *world) rotate(t *testing.T, nextKey string) {
	if out := w.laptop(t, "key", "rotate", "--import", nextKey); !strings.Contains(out, "builds now sign with both") {
		t.Fatalf("armor key rotate: %s", out)
	}
	w.commit(t)
	w.secrets["ARMOR_NEXT_SIGNING_KEY"] = string(readFileT(t, filepath.Join(w.ws.dir, ".armor", "keys", "next.sec.asc")))
	w.keyringDeb = w.keyringPackage(t)
}

// finishRotation ends it: armor key rotate --finish on the laptop, commit, the new key
// in ARMOR_SIGNING_KEY, and the keyring package of the new key alone. The distributor
// forgets ARMOR_NEXT_SIGNING_KEY for a week.
func (w *world) finishRotation(t *testing.T) {
	if out := w.laptop(t, "key", "rotate", "--finish"); !strings.Contains(out, "now signs alone") {
		t.Fatalf("armor key rotate --finish: %s", out)
	}
	w.commit(t)
	w.secrets["ARMOR_SIGNING_KEY"] = string(readFileT(t, filepath.Join(w.ws.dir, ".armor", "keys", "signing.sec.asc")))
	w.keyringDeb = w.keyringPackage(t)
}

// refusal runs a publish pipeline that must be refused with a message naming want, then
// the command it names (runAs, the files filled in) on a fresh runner, as the recipe's
// publish runs it: install, build the debs, the command, armor push --rebase.
func (w *world) refusal(t *testing.T, r recipe, debs map[string][]string, want, runAs string) {
	out, err := w.run(t, r.publish, debs, nil)
	if err == nil || !strings.Contains(out, want) {
		w.needed.Add(1)
		t.Errorf("%s: want a refusal naming %q, got %v:\n%s", w.date.Format(time.DateOnly), want, err, out)
		return
	}
	w.refused.Add(1)
	w.pipeline(t, ciJob{steps: []string{r.install, "make debs", runAs, "armor push --rebase"}, env: r.publish.env, secrets: r.publish.secrets, kind: "publish"},
		debs, nil)
}

func (w *world) change(t *testing.T, r recipe, change string) {
	w.pipeline(t, r.change, nil, map[string]string{"change": change, "ARMOR_CHANGE": change})
}

var gcDeletedRe = regexp.MustCompile(`gc: deleted \d+ releases and (\d+) of`)

// gc runs the weekly gc job and returns how many objects it deleted.
func (w *world) gc(t *testing.T, r recipe) int {
	out := w.pipeline(t, r.gc, nil, map[string]string{"ARMOR_GC": "1"})
	m := gcDeletedRe.FindStringSubmatch(out)
	if m == nil {
		t.Errorf("armor gc said:\n%s", out)
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// active is the active release's manifest, read as the status command gives it.
func (w *world) active(t *testing.T) *manifest.Manifest {
	var st struct {
		Active struct {
			Release  string `json:"release"`
			Manifest string `json:"manifest"`
		} `json:"active"`
	}
	if err := json.Unmarshal([]byte(armor(t, w.ws.dir, w.c.env(), "status", "--json")), &st); err != nil {
		t.Fatal(err)
	}
	data := w.object(t, st.Active.Manifest)
	m, err := manifest.Parse(data, "active manifest")
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func (w *world) object(t *testing.T, sum string) []byte {
	ctx := context.Background()
	s, err := publish.OpenStore(ctx, w.c.store)
	if err != nil {
		t.Fatal(err)
	}
	data, err := publish.FetchObject(ctx, s, sum)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// stableRelease is the active release's dists/stable/Release.
func stableRelease(t *testing.T, w *world, m *manifest.Manifest) string {
	for _, f := range m.Files {
		if f.Path == "dists/stable/Release" {
			return string(w.object(t, f.SHA256))
		}
	}
	t.Fatalf("release %s has no dists/stable/Release", m.ID)
	return ""
}

func releaseDate(t *testing.T, w *world, m *manifest.Manifest) time.Time {
	d, err := time.Parse(time.RFC1123, releaseField(stableRelease(t, w, m), "Date"))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func signedBy(t *testing.T, w *world) string {
	return releaseField(stableRelease(t, w, w.active(t)), "Signed-By")
}

// releaseField is a field of a Release file's header.
func releaseField(release, name string) string {
	for _, l := range strings.Split(release, "\n") {
		if v, ok := strings.CutPrefix(l, name+": "); ok {
			return v
		}
	}
	return ""
}

// wgetMirror updates a mirror made by plain wget -N -m (listings kept) through the proxy.
func (w *world) wgetMirror(t *testing.T, p *countingProxy, dir string) {
	cmd := exec.Command("wget", "-m", "-np", "-nH", "-nv", "-e", "robots=off", "-P", dir, "http://apt.acme.test/")
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "http_proxy=http://"+p.addr, "no_proxy=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("wget -N -m: %v\n%s", err, out)
	}
}

// debmirror updates a debmirror mirror of both suites through the proxy, checking the
// signatures with the keyring the distributor publishes now.
func (w *world) debmirror(t *testing.T, p *countingProxy, dir string) {
	home := t.TempDir()
	cmd := exec.Command("debmirror", "--host=apt.acme.test", "--root=/", "--method=http", "--proxy=http://"+p.addr,
		"--dist=stable,testing", "--section=main", "--arch=amd64", "--nosource", "--diff=none",
		"--rsync-extra=none", "--check-gpg", "--keyring="+w.ws.keyring(), "--ignore-release-gpg", dir)
	cmd.Env = append(os.Environ(), "HOME="+home, "GNUPGHOME="+filepath.Join(home, "gnupg"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("debmirror: %v\n%s", err, out)
	}
}

// aptUser is a machine whose owner followed the repository page: the key where the
// page's curl puts it, the page's sources entry as it shows it, then apt-get install of
// the keyring package with the real dpkg, which must ask nothing.
type aptUser struct {
	root    string
	keyring string // /usr/share/keyrings/acme-archive-keyring.gpg under root
	apt     *apttest.Apt
}

func (w *world) newUser(t *testing.T, p *countingProxy) *aptUser {
	m := w.active(t)
	waitServedRelease(t, w.c, w.ws.host, m)
	u := &aptUser{root: t.TempDir()}
	u.keyring = filepath.Join(u.root, "usr", "share", "keyrings", "acme-archive-keyring.gpg")
	_, key := w.c.mustGet(t, w.ws.host, "/acme-archive-keyring.gpg", 200)
	if err := os.MkdirAll(filepath.Dir(u.keyring), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(u.keyring, key, 0o644); err != nil {
		t.Fatal(err)
	}
	// The page's entry, its Signed-By under the user's root (apt here is not chrooted).
	page := pageSources(t, w.c, w.ws.host)
	if !strings.Contains(page, "Signed-By: /usr/share/keyrings/acme-archive-keyring.gpg") {
		t.Fatalf("the page's entry is not signed by the keyring the keyring package installs:\n%s", page)
	}
	u.apt = apttest.New(t, apttest.Options{
		SourcesText: strings.Replace(page, "Signed-By: /usr/", "Signed-By: "+u.root+"/usr/", 1),
		Proxy:       "http://" + p.addr,
	})
	u.upgrade(t)
	return u
}

// upgrade is apt-get update, then the keyring package and hello installed (upgraded)
// with dpkg; a conffile question fails it.
func (u *aptUser) upgrade(t *testing.T) {
	u.apt.Update(t)
	files := u.apt.Download(t, "acme-archive-keyring", "hello")
	if out, err := apttest.DpkgInstall(t, u.root, files...); err != nil || strings.Contains(out, "conffile") {
		t.Errorf("dpkg -i %v: %v\n%s", files, err, out)
	}
}

func (u *aptUser) policy(t *testing.T, pkg string) string { return u.apt.Policy(t, pkg) }

// checkDates: every release the year recorded (gc deletes some) is dated by its build
// date within the year, never ahead of controld's clock, and after the release it was
// built on (two pipelines at once share a SOURCE_DATE_EPOCH: the second is moved a second
// on); the recorded dates span the year.
func checkDates(t *testing.T, w *world, clk clock) {
	var rels []api.Release
	if err := json.Unmarshal([]byte(armor(t, w.ws.dir, w.c.env(), "--json", "releases", "list")), &rels); err != nil {
		t.Fatal(err)
	}
	dates := map[string]time.Time{}
	for _, r := range rels {
		d, err := time.Parse(time.RFC3339, r.Date)
		if err != nil {
			t.Fatalf("release %s: date %q: %v", r.ID, r.Date, err)
		}
		dates[r.ID] = d
	}
	now := time.Now()
	var first, last time.Time
	for _, r := range rels {
		d := dates[r.ID]
		if d.After(now) || d.Before(clk.day0.AddDate(0, 0, -1)) {
			t.Errorf("release %s is dated %s, outside the year (%s to now)", r.ID, d, clk.day0)
		}
		if pd, ok := dates[r.Parent]; ok && !d.After(pd) {
			t.Errorf("release %s is dated %s, not after the release it was built on (%s, %s)", r.ID, d, r.Parent, pd)
		}
		if first.IsZero() || d.Before(first) {
			first = d
		}
		if d.After(last) {
			last = d
		}
	}
	if last.Sub(first) < 300*24*time.Hour {
		t.Errorf("the recorded releases span %s to %s, not the year", first, last)
	}
	t.Logf("%d releases recorded (after gc), dated %s to %s, each after its parent, none ahead of %s",
		len(rels), first.Format(time.DateOnly), last.Format(time.DateOnly), now.UTC().Format(time.RFC3339))
}
