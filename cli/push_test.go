package cli

// Tests of armor push as a user runs it, against a local directory store and a real S3
// server on loopback (cmd/s3server): refusing a tampered tree, dry runs, the repository's
// lock, and the messages for bad credentials and an endpoint that does not answer; with
// the armor binary against a controld in process, activating only on the parent, also
// when two pushes race. The push workflow itself (what an incremental push uploads,
// resuming a killed push) is tested in package publish.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/armor-apt/armor/cli/config"
	"github.com/armor-apt/armor/controld/client"
	"github.com/armor-apt/armor/internal/lockfile"
	"github.com/armor-apt/armor/internal/testkit/controldtest"
	"github.com/armor-apt/armor/internal/testkit/s3test"
	"github.com/armor-apt/armor/internal/testkit/synth"
	"github.com/armor-apt/armor/manifest"
	"github.com/armor-apt/armor/store"
	"github.com/armor-apt/armor/store/storetest"
)

// pushProject is a built project and the store it pushes to.
type pushProject struct {
	dir, cfg, remote string
}

func (p pushProject) manifestPath() string { return filepath.Join(p.dir, testManifestName) }
func (p pushProject) tree() string         { return filepath.Join(p.dir, testTreeName) }

// newPushProject writes and builds a project of testPackagesCount packages in two
// architectures, configured to push to remote. It reads no environment variable (the
// signing key is not encrypted), so push tests run in parallel.
func newPushProject(t *testing.T, remote string) pushProject {
	t.Helper()
	p := pushProject{dir: t.TempDir(), remote: remote}
	p.cfg = newProject(t, p.dir, projectOptions{store: remote})
	if _, err := runBuild(context.Background(), p.cfg, buildOptions{}); err != nil {
		t.Fatalf("build: %v", err)
	}
	return p
}

// openStore opens the project's store the way push does, counted.
func (p pushProject) openStore(t *testing.T) *store.Counting {
	t.Helper()
	s, err := store.OpenRclone(context.Background(), p.remote)
	if err != nil {
		t.Fatal(err)
	}
	return store.NewCounting(s)
}

// releaseObjects are the digests a push of the manifest at path must make present: the
// release's objects and the manifest itself.
func releaseObjects(t *testing.T, path string) map[string]int64 {
	t.Helper()
	data := readFileT(t, path)
	m, err := manifest.Parse(data, path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, o := range m.Objects() {
		out[o.SHA256] = o.Size
	}
	sum := sha256.Sum256(data)
	out[hex.EncodeToString(sum[:])] = int64(len(data))
	return out
}

// TestPushRefusesTamperedTree: a tree file changed after the build is refused, named, and
// nothing is stored for it.
func TestPushRefusesTamperedTree(t *testing.T) {
	t.Parallel()
	tampers := []struct {
		name   string
		tamper func(data []byte) []byte
		want   string
	}{
		{"same size", func(d []byte) []byte { d = slices.Clone(d); d[len(d)/2] ^= 1; return d }, "no longer has sha256"},
		{"truncated", func(d []byte) []byte { return d[:len(d)-1] }, "bytes, the manifest says"},
		{"grown", func(d []byte) []byte { return append(slices.Clone(d), '\n') }, "bytes, the manifest says"},
	}
	for _, kind := range s3test.StoreKinds(t) {
		t.Run(kind.Name, func(t *testing.T) {
			for _, tc := range tampers {
				t.Run(tc.name, func(t *testing.T) {
					// A fresh store: an object already there is never read from the tree.
					p := newPushProject(t, kind.Remote(t))
					m := loadManifest(t, p.manifestPath())
					pkg := m.Packages[len(m.Packages)/2]
					full := filepath.Join(p.tree(), filepath.FromSlash(pkg.Path))
					orig := readFileT(t, full)
					if err := os.WriteFile(full, tc.tamper(orig), 0o644); err != nil {
						t.Fatal(err)
					}
					r := armorFails(t, 1, []string{full, "changed since the build", tc.want}, "-c", p.cfg, "push", "--store-only")
					if strings.Contains(r.stdout, "pushed release") {
						t.Errorf("a failed push printed success:\n%s", r.stdout)
					}
					cas := p.openStore(t)
					if ok, err := cas.Has(context.Background(), pkg.SHA256); ok || err != nil {
						t.Errorf("the store holds the tampered object %s (%v, %v)", pkg.SHA256, ok, err)
					}
					mdata := readFileT(t, p.manifestPath())
					msum := sha256.Sum256(mdata)
					if ok, err := cas.Has(context.Background(), hex.EncodeToString(msum[:])); ok || err != nil {
						t.Errorf("the store holds the manifest of a refused push (%v, %v)", ok, err)
					}
					if state, _ := filepath.Glob(filepath.Join(p.dir, ".armor", "cache", "pushed-*.toml")); len(state) != 0 {
						t.Errorf("a refused push wrote the pushed state %v", state)
					}
					if kind.Name == "local" {
						if tmp, _ := os.ReadDir(filepath.Join(p.remote, "tmp")); len(tmp) != 0 {
							t.Errorf("the local store keeps %d temporary uploads", len(tmp))
						}
					}

					// Restored, the tree pushes.
					if err := os.WriteFile(full, orig, 0o644); err != nil {
						t.Fatal(err)
					}
					out := armorOK(t, "-c", p.cfg, "push", "--store-only")
					if !strings.Contains(out, "pushed release") {
						t.Errorf("push of the restored tree: %s", out)
					}
					storetest.CheckHolds(t, cas, releaseObjects(t, p.manifestPath()))
				})
			}
		})
	}
}

// TestPushDryRunAndStoreOnly: --dry-run lists what it would upload and uploads nothing;
// a push --store-only says the release is stored but not recorded.
func TestPushDryRunAndStoreOnly(t *testing.T) {
	t.Parallel()
	for _, kind := range s3test.StoreKinds(t) {
		t.Run(kind.Name, func(t *testing.T) {
			p := newPushProject(t, kind.Remote(t))
			all := releaseObjects(t, p.manifestPath())
			m := loadManifest(t, p.manifestPath())

			out := armorOK(t, "-c", p.cfg, "push", "--store-only", "--dry-run")
			if !strings.Contains(out, "dry run: "+strconv.Itoa(len(all))+" object(s) would be uploaded") {
				t.Errorf("dry run output:\n%s", out)
			}
			for _, path := range []string{m.Packages[0].Path, "dists/stable/InRelease", testManifestName} {
				if !strings.Contains(out, path) {
					t.Errorf("dry run does not list %s:\n%s", path, out)
				}
			}
			cas := p.openStore(t)
			for sum := range all {
				if ok, err := cas.Has(context.Background(), sum); ok || err != nil {
					t.Errorf("after a dry run the store has %s (%v, %v)", sum, ok, err)
				}
			}
			if state, _ := filepath.Glob(filepath.Join(p.dir, ".armor", "cache", "pushed-*.toml")); len(state) != 0 {
				t.Errorf("a dry run wrote the pushed state %v", state)
			}

			out = armorOK(t, "-c", p.cfg, "push", "--store-only")
			for _, want := range []string{"pushed release " + m.ID[:12], "uploaded " + strconv.Itoa(len(all)), "--store-only", "not recorded"} {
				if !strings.Contains(out, want) {
					t.Errorf("push output lacks %q:\n%s", want, out)
				}
			}
			storetest.CheckHolds(t, cas, all)

			out = armorOK(t, "-c", p.cfg, "push", "--store-only", "--dry-run")
			if !strings.Contains(out, "dry run: 0 object(s)") {
				t.Errorf("dry run after the push:\n%s", out)
			}
			out = armorOK(t, "--json", "-c", p.cfg, "push", "--store-only")
			for _, want := range []string{`"uploaded": 0`, `"known": ` + strconv.Itoa(len(all)), `"recorded": false`, `"release": "` + m.ID + `"`} {
				if !strings.Contains(out, want) {
					t.Errorf("push --json lacks %s:\n%s", want, out)
				}
			}
		})
	}
}

// TestPushS3WrongCredentials: a refused secret fails with a message naming the store and
// the cause, and never shows the secret.
func TestPushS3WrongCredentials(t *testing.T) {
	t.Parallel()
	srv := s3test.Start(t)
	srv.Remote("bucket", "") // creates the bucket
	const secret = "not-the-SECRET-value"
	p := newPushProject(t, srv.RemoteWith(srv.KeyID, secret, "bucket", "armor"))
	r := armorFails(t, 1, []string{srv.Endpoint, "bucket", "access denied", "credentials"}, "-c", p.cfg, "push", "--store-only")
	if strings.Contains(r.stderr+r.stdout, secret) {
		t.Errorf("the message shows the secret:\n%s", r)
	}
	if entries, _ := os.ReadDir(filepath.Join(srv.Dir, "bucket")); len(entries) != 0 {
		t.Errorf("a refused push stored %d entries", len(entries))
	}
}

// TestPushUnansweringEndpoint: an S3 endpoint that accepts connections and never answers
// makes push fail within a bounded time, naming the store.
func TestPushUnansweringEndpoint(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // held open, never answered
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	endpoint := "http://" + ln.Addr().String()
	p := newPushProject(t, s3test.EndpointRemote(endpoint, "key", "secret", "bucket", ""))

	const bound = 75 * time.Second
	type outcome struct {
		r       result
		elapsed time.Duration
	}
	done := make(chan outcome, 1)
	start := time.Now()
	go func() {
		r := armor(t, "-c", p.cfg, "push", "--store-only")
		done <- outcome{r, time.Since(start)}
	}()
	select {
	case o := <-done:
		t.Logf("push to an unanswering endpoint failed after %v: %s", o.elapsed.Round(time.Second), o.r.stderr)
		if o.r.code != 1 {
			t.Fatalf("want exit 1, got %s", o.r)
		}
		for _, want := range []string{endpoint, "no answer within"} {
			if !strings.Contains(o.r.stderr, want) {
				t.Errorf("stderr lacks %q:\n%s", want, o.r.stderr)
			}
		}
	case <-time.After(bound):
		t.Fatalf("push to an endpoint that never answers did not return within %v", bound)
	}
}

// TestPushWithoutStore: no [store] is a clear error naming armor.toml.
func TestPushWithoutStore(t *testing.T) {
	t.Parallel()
	p := newPushProject(t, "")
	armorFails(t, 1, []string{p.cfg, "no [store] configured"}, "-c", p.cfg, "push", "--store-only")
}

// lockSoon takes the lock, retrying for a second: a lock just released can stay held for
// a moment by a child another parallel test is forking, which holds a copy of every
// descriptor until it execs (close-on-exec closes them only then).
func lockSoon(t *testing.T, cache string, exclusive bool) func() {
	t.Helper()
	deadline := time.Now().Add(time.Second)
	for {
		unlock, err := lockfile.Lock(cache, exclusive)
		if err == nil {
			return unlock
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestBuildAndPushLock: a build does not start while another build or a push holds the
// repository's lock, nor a push during a build; each names the lock file and leaves the
// manifest and the tree as they were. Pushes share the lock.
func TestBuildAndPushLock(t *testing.T) {
	t.Parallel()
	p := newPushProject(t, filepath.Join(t.TempDir(), "store"))
	cfg, err := config.Load(p.cfg)
	if err != nil {
		t.Fatal(err)
	}
	cache := cfg.Resolve(cfg.Output.Cache)
	lock := filepath.Join(cache, "lock")
	inRelease := filepath.Join(p.tree(), "dists", "stable", "InRelease")
	read := func(path string) string {
		t.Helper()
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	manifestBefore, inReleaseBefore := read(p.manifestPath()), read(inRelease)

	// As while another build runs: neither a build nor a push starts. (The build just
	// made released the lock, which a forking parallel test may hold a moment longer.)
	unlock := lockSoon(t, cache, true)
	want := []string{lock, "another armor build or push"}
	armorFails(t, 1, want, "-c", p.cfg, "build", "--resign")
	armorFails(t, 1, want, "-c", p.cfg, "push", "--store-only")
	unlock()

	// As while a push runs: another push may run, a build may not.
	unlock = lockSoon(t, cache, false)
	armorFails(t, 1, want, "-c", p.cfg, "build", "--resign")
	if _, err := runPush(context.Background(), p.cfg, pushOptions{Store: p.openStore(t), Jobs: 2, StoreOnly: true}); err != nil {
		t.Errorf("push beside another push: %v", err)
	}
	unlock()

	if read(p.manifestPath()) != manifestBefore || read(inRelease) != inReleaseBefore {
		t.Error("a build refused for the lock changed the manifest or InRelease")
	}
	// Released: a build runs.
	res, err := runBuild(context.Background(), p.cfg, buildOptions{Resign: true})
	if err != nil {
		t.Fatalf("build after the lock was released: %v", err)
	}
	if res.Stats.SuitesSigned == 0 {
		t.Errorf("the build after the lock was released signed nothing: %+v", res.Stats)
	}
}

// armorBinary is the armor binary for tests that run it as separate processes:
// $ARMOR_BIN (bin/armor after make build), or one built for the test.
func armorBinary(t testing.TB) string {
	t.Helper()
	if bin := os.Getenv("ARMOR_BIN"); bin != "" {
		return bin
	}
	bin := filepath.Join(t.TempDir(), "armor")
	if out, err := exec.Command("go", "build", "-o", bin, "./armor").CombinedOutput(); err != nil {
		t.Fatalf("build armor (or set ARMOR_BIN to a built one, e.g. bin/armor after make build): %v\n%s", err, out)
	}
	return bin
}

// runBinary runs the armor binary with args, as a user's shell or CI job does.
func runBinary(bin string, args ...string) (result, error) {
	cmd := exec.Command(bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		return result{}, fmt.Errorf("run %s %s: %w", bin, strings.Join(args, " "), err)
	}
	return result{cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()}, nil
}

// controldSite is a controld in process on 127.0.0.1 over a local directory store, and
// a token file holding a token with every right.
type controldSite struct {
	url, remote, tokenFile string
	client                 *client.Client
}

func newControldSite(t *testing.T) controldSite {
	t.Helper()
	dir := t.TempDir()
	site := controldSite{remote: filepath.Join(dir, "store"), tokenFile: filepath.Join(dir, "token")}
	s, err := store.OpenRclone(context.Background(), site.remote)
	if err != nil {
		t.Fatal(err)
	}
	srv := controldtest.Start(t, s)
	if err := os.WriteFile(site.tokenFile, []byte(srv.Secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	site.url, site.client = srv.URL, srv.Client
	return site
}

// project writes a project that pushes to the site, with the test packages and extra
// ones, and builds it.
func (s controldSite) project(t *testing.T, extra ...string) pushProject {
	t.Helper()
	p := pushProject{dir: t.TempDir(), remote: s.remote}
	p.cfg = newProject(t, p.dir, projectOptions{store: s.remote,
		extra: fmt.Sprintf("\n[controld]\nurl = %q\ntoken_file = %q\n", s.url, s.tokenFile)})
	p.add(t, extra...)
	return p
}

func (s controldSite) active(t *testing.T) string {
	t.Helper()
	st, err := s.client.Status(context.Background(), "test")
	if err != nil {
		t.Fatal(err)
	}
	if st.Active == nil {
		return ""
	}
	return st.Active.Release
}

// clone copies the project (armor.toml, manifest, tree and cache) into a new directory:
// another pipeline starting from the same parent.
func (p pushProject) clone(t *testing.T) pushProject {
	t.Helper()
	q := pushProject{dir: t.TempDir(), remote: p.remote}
	if err := os.CopyFS(q.dir, os.DirFS(p.dir)); err != nil {
		t.Fatal(err)
	}
	q.cfg = filepath.Join(q.dir, testConfigName)
	return q
}

// add writes the named packages into the project and builds it; it returns the release.
func (p pushProject) add(t *testing.T, names ...string) *buildResult {
	t.Helper()
	for _, name := range names {
		if _, err := synth.WriteOne(filepath.Join(p.dir, "debs"), name, "1.0-1", "amd64", ""); err != nil {
			t.Fatal(err)
		}
	}
	res, err := runBuild(context.Background(), p.cfg, buildOptions{})
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	return res
}

// pushJSON runs armor push --json as a separate process and decodes what it printed.
func pushJSON(bin string, p pushProject) (result, pushResult, error) {
	r, err := runBinary(bin, "--json", "-c", p.cfg, "push")
	var out pushResult
	if err == nil {
		if jerr := json.Unmarshal([]byte(r.stdout), &out); jerr != nil {
			err = fmt.Errorf("armor push --json printed no result (%v): %s", jerr, r)
		}
	}
	return r, out, err
}

// checkStale fails unless r is a push of release refused with exit status 3 because it
// was built on parent while active is the active release.
func checkStale(t *testing.T, r result, release, parent, active string) {
	t.Helper()
	if r.code != exitStaleParent {
		t.Fatalf("push of %.12s (built on %.12s) while %.12s is active: want exit %d, got %s", release, parent, active, exitStaleParent, r)
	}
	built := "first release (no parent)"
	if parent != "" {
		built = "was built on " + parent[:12]
	}
	for _, want := range []string{"release " + release[:12], built, "the active release is " + active[:12],
		"another release was activated since this one was built: run armor push --rebase (it applies this release's change again on the active release, and pushes that), or build on the active release with armor build --from-active and push again"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("the refused push's message lacks %q:\n%s", want, r.stderr)
		}
	}
	if strings.Contains(r.stdout, "recorded and activated") {
		t.Errorf("the refused push claims an activation:\n%s", r.stdout)
	}
}

// TestPushOnlyOnParent, with the armor binary: of two releases built on the same parent
// and pushed one after the other, the second exits 3 naming the active release and its
// parent, and the active release keeps the first one's package; pushing the active
// release again exits 0; after armor rollback re-published, pushing the rolled-back
// release again (from a checkout that still has it) is refused as rolled back, exit 4,
// rather than re-activating it; a release built as the first
// is refused once the repository has an active release.
func TestPushOnlyOnParent(t *testing.T) {
	t.Parallel()
	bin := armorBinary(t)
	site := newControldSite(t)
	base := site.project(t)
	armorOK(t, "-c", base.cfg, "repos", "create")
	if r, err := runBinary(bin, "-c", base.cfg, "push"); err != nil || r.code != 0 {
		t.Fatalf("first push: %v %s", err, r)
	}
	parent := site.active(t)

	x, y := base.clone(t), base.clone(t)
	first, second := x.add(t, "alpha"), y.add(t, "beta")
	if r, err := runBinary(bin, "-c", x.cfg, "push"); err != nil || r.code != 0 || !strings.Contains(r.stdout, "recorded and activated") {
		t.Fatalf("push of the first release built on %.12s: %v %s", parent, err, r)
	}
	r, err := runBinary(bin, "-c", y.cfg, "push")
	if err != nil {
		t.Fatal(err)
	}
	checkStale(t, r, second.Release, parent, first.Release)
	t.Logf("the second push: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	r, out, err := pushJSON(bin, y)
	if err != nil {
		t.Fatal(err)
	}
	checkStale(t, r, second.Release, parent, first.Release)
	if out.Outcome != outcomeStaleParent || out.Parent != parent || out.Active != first.Release || out.Recorded || out.Activated || out.Error == "" {
		t.Errorf("push --json of the refused release: %+v", out)
	}
	if got := site.active(t); got != first.Release {
		t.Fatalf("active after the refused push: %.12s, want %.12s", got, first.Release)
	}
	if m := loadManifest(t, x.manifestPath()); !slices.ContainsFunc(m.Packages, func(p manifest.Package) bool { return p.Name == "alpha" }) {
		t.Errorf("the active release %.12s lacks alpha", m.ID)
	}

	// Pushed again (as after a push that died once it had activated): exit 0.
	r, out, err = pushJSON(bin, x)
	if err != nil || r.code != 0 || out.Outcome != outcomeActivated || out.Parent != parent {
		t.Fatalf("push of the active release again: %v %s", err, r)
	}

	// armor rollback re-publishes the parent's content as a new release; the release it
	// rolled back stays rolled back.
	keep := x.clone(t)
	armorOK(t, "-c", x.cfg, "rollback")
	rolled := site.active(t)
	if rolled == first.Release || rolled == parent {
		t.Fatalf("after armor rollback %.12s is active, want a new release", rolled)
	}
	checkRolledBack(t, pushBinary(t, bin, keep), first.Release, first.Release)

	// A first release (no parent) once the repository has an active one.
	z := site.project(t, "zeta")
	zm := loadManifest(t, z.manifestPath())
	if zm.Parent != "" {
		t.Fatalf("a fresh project's release has the parent %s", zm.Parent)
	}
	r, err = runBinary(bin, "-c", z.cfg, "push")
	if err != nil {
		t.Fatal(err)
	}
	checkStale(t, r, zm.ID, "", rolled)
	if got := site.active(t); got != rolled {
		t.Errorf("active after the refused pushes: %.12s, want %.12s", got, rolled)
	}

	help := strings.Join(strings.Fields(armorOK(t, "push", "--help")), " ") // unwrapped
	if !strings.Contains(help, fmt.Sprintf("%d when it was refused because the release it was built on is not the active", exitStaleParent)) {
		t.Errorf("armor push --help does not document exit status %d:\n%s", exitStaleParent, help)
	}
}

// TestPushRaceProcesses: two armor push processes with releases built on the same
// parent, started at once, a few rounds over: each round exactly one activates, the
// other exits 3 naming the winner, and the active release holds every winner's package.
func TestPushRaceProcesses(t *testing.T) {
	t.Parallel()
	bin := armorBinary(t)
	site := newControldSite(t)
	w := site.project(t)
	armorOK(t, "-c", w.cfg, "repos", "create")
	if r, err := runBinary(bin, "-c", w.cfg, "push"); err != nil || r.code != 0 {
		t.Fatalf("first push: %v %s", err, r)
	}
	parent := site.active(t)
	var won []string
	for round := range 4 {
		racers := []pushProject{w.clone(t), w.clone(t)}
		names := []string{fmt.Sprintf("race%d-a", round), fmt.Sprintf("race%d-b", round)}
		ids := make([]string, 2)
		for k, p := range racers {
			ids[k] = p.add(t, names[k]).Release
		}
		results := make([]result, 2)
		outs := make([]pushResult, 2)
		errs := make([]error, 2)
		var wg sync.WaitGroup
		for k, p := range racers {
			wg.Go(func() { results[k], outs[k], errs[k] = pushJSON(bin, p) })
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
		winner := slices.IndexFunc(results, func(r result) bool { return r.code == 0 })
		if winner < 0 || results[1-winner].code == 0 {
			t.Fatalf("round %d: exits %d and %d, want one 0 and one %d:\n%s\n%s", round, results[0].code, results[1].code, exitStaleParent, results[0], results[1])
		}
		loser := 1 - winner
		checkStale(t, results[loser], ids[loser], parent, ids[winner])
		if outs[winner].Outcome != outcomeActivated || outs[loser].Outcome != outcomeStaleParent || outs[loser].Active != ids[winner] {
			t.Errorf("round %d: --json outcomes %+v and %+v", round, outs[winner], outs[loser])
		}
		if got := site.active(t); got != ids[winner] {
			t.Fatalf("round %d: %.12s is active, want the winner %.12s", round, got, ids[winner])
		}
		won = append(won, names[winner])
		m := loadManifest(t, racers[winner].manifestPath())
		for _, name := range append(slices.Clone(won), names[loser]) {
			has := slices.ContainsFunc(m.Packages, func(p manifest.Package) bool { return p.Name == name })
			if has != (name != names[loser]) {
				t.Errorf("round %d: the active release has %s: %v", round, name, has)
			}
		}
		t.Logf("round %d: %s won", round, names[winner])
		w, parent = racers[winner], ids[winner]
	}
}

// variant writes a copy of the project's armor.toml with extra appended, beside it (so
// its relative paths name the same tree, manifest and cache), and returns its path.
func (p pushProject) variant(t *testing.T, name, extra string) string {
	t.Helper()
	path := filepath.Join(p.dir, name+".toml")
	if err := os.WriteFile(path, append(readFileT(t, p.cfg), extra...), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// newToken creates a token in the site's controld and writes its secret to a file.
func (s controldSite) newToken(t *testing.T, name string, repos []string, actions ...string) string {
	t.Helper()
	out, err := s.client.CreateToken(context.Background(), name, repos, actions)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(out.Secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestPushChecksFirst: armor push fails before it asks the store anything when no
// controld is configured (unless --store-only), with no token, when controld does not
// answer, refuses the token, or the token may not push (or activate) on the repository,
// and when the repository is unknown; each error says what is wrong and what to do. Once
// put right, the same push goes through.
func TestPushChecksFirst(t *testing.T) {
	t.Parallel()
	site := newControldSite(t)
	p := newPushProject(t, site.remote)
	ctx := context.Background()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close()
	bogus := filepath.Join(t.TempDir(), "bogus")
	if err := os.WriteFile(bogus, []byte("armor_not-a-real-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	section := func(url, tokenFile string) string {
		return fmt.Sprintf("\n[controld]\nurl = %q\ntoken_file = %q\n", url, tokenFile)
	}
	const unset = "ARMOR_TEST_TOKEN_NEVER_SET"

	tests := []struct {
		name     string
		extra    string // appended to armor.toml
		activate bool
		want     []string
	}{
		{"unknown repository", section(site.url, site.tokenFile), true,
			[]string{"controld " + site.url + " has no repository test", "armor repos create"}},
		{"no controld", "", true,
			[]string{"no controld to record the release in", "[controld] url in", "$ARMOR_CONTROLD_URL", "--controld URL", "--store-only"}},
		{"no token", fmt.Sprintf("\n[controld]\nurl = %q\ntoken_env = %q\n", site.url, unset), true,
			[]string{"no controld token: set $" + unset, "push to repository test", "--store-only"}},
		{"controld down", section(dead, site.tokenFile), true,
			[]string{"controld " + dead + " does not answer", "the URL is from [controld] url in", "--store-only"}},
		{"token refused", section(site.url, bogus), true,
			[]string{"refuses the token (from [controld] token_file " + bogus + ")", "unknown there or revoked"}},
		{"other repository", section(site.url, site.newToken(t, "elsewhere", []string{"other"}, "push", "activate")), true,
			[]string{"token elsewhere", "may not push to repository test", "scoped to other", "armor tokens create NAME --for test --action push --action activate"}},
		{"read only", section(site.url, site.newToken(t, "edge", []string{"*"}, "read")), true,
			[]string{"token edge", "may not push on repository test (it may read)"}},
		{"push may not activate", section(site.url, site.newToken(t, "ci", []string{"test"}, "push")), true,
			[]string{"token ci", "may not activate on repository test (it may push)", "--no-activate"}},
	}
	for i, tc := range tests {
		cfg := p.variant(t, fmt.Sprintf("case%d", i), tc.extra)
		t.Run(tc.name, func(t *testing.T) {
			for _, dry := range []bool{false, true} {
				s := p.openStore(t)
				_, err := runPush(ctx, cfg, pushOptions{Activate: tc.activate, DryRun: dry, Jobs: 2, Store: s})
				if err == nil {
					t.Fatalf("dry run %v: the push went through", dry)
				}
				if !dry {
					t.Log(err)
				}
				for _, w := range append(tc.want, "nothing was uploaded") {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("dry run %v: the error lacks %q:\n%v", dry, w, err)
					}
				}
				if n := s.Counts(); n.Requests() != 0 {
					t.Errorf("dry run %v: the store was asked before the checks failed: %+v", dry, n)
				}
			}
		})
		if i == 0 {
			armorOK(t, "-c", cfg, "repos", "create")
		}
	}
	if objs, _ := filepath.Glob(filepath.Join(site.remote, "objects", "*", "*", "*")); len(objs) != 0 {
		t.Fatalf("the refused pushes stored %d objects", len(objs))
	}

	// Put right, the pushes go through: a push-only token records a draft.
	ci := site.newToken(t, "ci-draft", []string{"test"}, "push")
	out := armorOK(t, "-c", p.variant(t, "draft", section(site.url, ci)), "push", "--no-activate")
	if !strings.Contains(out, "recorded in controld") {
		t.Errorf("push --no-activate with a push-only token:\n%s", out)
	}
	out = armorOK(t, "-c", p.variant(t, "ok", section(site.url, site.tokenFile)), "push")
	if !strings.Contains(out, "recorded and activated") {
		t.Errorf("push with the right token:\n%s", out)
	}
	storetest.CheckHolds(t, p.openStore(t), releaseObjects(t, p.manifestPath()))
}

// TestPushControldURLPrecedence: push takes controld's URL from --controld, else
// $ARMOR_CONTROLD_URL, else armor.toml, and --store-only needs none.
func TestPushControldURLPrecedence(t *testing.T) {
	site := newControldSite(t)
	p := newPushProject(t, site.remote)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close()
	cfg := p.variant(t, "dead", fmt.Sprintf("\n[controld]\nurl = %q\ntoken_file = %q\n", dead, site.tokenFile))
	armorOK(t, "-c", cfg, "repos", "create", "--controld", site.url)

	t.Setenv("ARMOR_CONTROLD_URL", "")
	os.Unsetenv("ARMOR_CONTROLD_URL")
	armorFails(t, 1, []string{"controld " + dead + " does not answer", "the URL is from [controld] url in " + cfg}, "-c", cfg, "push")
	armorFails(t, 1, []string{"controld " + dead + " does not answer", "the URL is from --controld"}, "-c", cfg, "push", "--controld", dead)
	if out := armorOK(t, "-c", cfg, "push", "--no-activate", "--controld", site.url); !strings.Contains(out, "recorded in controld "+site.url) {
		t.Errorf("--controld over armor.toml:\n%s", out)
	}

	t.Setenv("ARMOR_CONTROLD_URL", site.url)
	if out := armorOK(t, "-c", cfg, "push"); !strings.Contains(out, "recorded and activated in controld "+site.url) {
		t.Errorf("$ARMOR_CONTROLD_URL over armor.toml:\n%s", out)
	}
	t.Setenv("ARMOR_CONTROLD_URL", dead)
	armorFails(t, 1, []string{"controld " + dead + " does not answer", "the URL is from $ARMOR_CONTROLD_URL"}, "-c", cfg, "push")
	if out := armorOK(t, "-c", cfg, "push", "--controld", site.url); !strings.Contains(out, "recorded and activated in controld "+site.url) {
		t.Errorf("--controld over $ARMOR_CONTROLD_URL:\n%s", out)
	}
	if out := armorOK(t, "-c", cfg, "status", "--controld", site.url); !strings.Contains(out, "active: ") {
		t.Errorf("status --controld over $ARMOR_CONTROLD_URL:\n%s", out)
	}
	if out := armorOK(t, "-c", cfg, "push", "--store-only"); !strings.Contains(out, "not recorded in controld") {
		t.Errorf("push --store-only with a dead controld:\n%s", out)
	}
	r := armor(t, "-c", cfg, "push", "--store-only", "--no-activate")
	if r.code != 2 {
		t.Errorf("push --store-only --no-activate: want a usage error, got %s", r)
	}
}
