package publish_test

// Tests of recording, activating and rolling back against a real controld, in process
// over HTTP on 127.0.0.1, sharing an in-memory store with the pushes.

import (
	"bytes"
	"context"
	"crypto"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/armor-apt/armor/controld/api"
	"github.com/armor-apt/armor/controld/client"
	"github.com/armor-apt/armor/debian/release"
	"github.com/armor-apt/armor/debian/sign"
	"github.com/armor-apt/armor/internal/testkit/controldtest"
	"github.com/armor-apt/armor/internal/testkit/synth"
	"github.com/armor-apt/armor/manifest"
	"github.com/armor-apt/armor/publish"
	"github.com/armor-apt/armor/store"
)

// newControld starts a controld whose object store is s, creates the repository "test"
// with the test key registered, and returns a client with every right.
func newControld(t *testing.T, s store.Store) (*client.Client, string) {
	t.Helper()
	srv := controldtest.Start(t, s)
	c := srv.Client
	var pub bytes.Buffer
	if err := loadTestKey(t).WritePublicArmored(&pub); err != nil {
		t.Fatal(err)
	}
	_, err := c.CreateRepo(context.Background(), api.CreateRepoRequest{
		Name: "test", Hostnames: []string{"apt.armor.test"}, Keys: []string{pub.String()},
	})
	if err != nil {
		t.Fatal(err)
	}
	return c, srv.URL
}

func loadTestKey(t *testing.T) *sign.Key {
	t.Helper()
	f, err := os.Open(testKey)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	key, err := sign.ReadSecretKey(f, nil)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// pushTo pushes the project to s and records it in the controld at url.
func pushTo(t *testing.T, p pushProject, s store.Store, c *client.Client, url string, activate bool) *publish.PushResult {
	t.Helper()
	res, err := pushRecord(p, s, c, url, activate)
	if err != nil {
		t.Fatalf("push: %v", err)
	}
	return res
}

// pushRecord pushes the project to s and records it in the controld at url, returning
// what Push returned.
func pushRecord(p pushProject, s store.Store, c *client.Client, url string, activate bool) (*publish.PushResult, error) {
	o := p.options(s, 4)
	o.Controld = &publish.Controld{URL: url, Repo: "test", Activate: activate,
		Client: func() (*client.Client, error) { return c, nil }}
	return publish.Push(context.Background(), o)
}

func activeRelease(t *testing.T, c *client.Client) string {
	t.Helper()
	st, err := c.Status(context.Background(), "test")
	if err != nil {
		t.Fatal(err)
	}
	if st.Active == nil {
		return ""
	}
	return st.Active.Release
}

// TestPushRecordActivate: a push records and activates its release; pushed again it is
// recorded without a flip; --no-activate records a draft that Activate, given a prefix
// of its id, makes active.
func TestPushRecordActivate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := store.NewMemory()
	c, url := newControld(t, s)
	p := newPushProject(t, "")

	first := pushTo(t, p, s, c, url, true)
	if !first.Recorded || !first.Activated || first.Controld != url || activeRelease(t, c) != first.Release {
		t.Fatalf("first push: %+v; active %s", first, activeRelease(t, c))
	}
	again := pushTo(t, p, s, c, url, true)
	if !again.Recorded || !again.Activated {
		t.Errorf("push of the active release: %+v; want recorded and active", again)
	}
	if h, err := c.History(ctx, "test"); err != nil || len(h) != 1 {
		t.Errorf("history after pushing the active release again: %d activations (%v), want 1", len(h), err)
	}

	if _, err := synth.WriteOne(filepath.Join(p.dir, "debs"), "added", "1.0-1", "amd64", ""); err != nil {
		t.Fatal(err)
	}
	p.build(t)
	draft := pushTo(t, p, s, c, url, false)
	if !draft.Recorded || draft.Activated || activeRelease(t, c) != first.Release {
		t.Fatalf("push without activation: %+v; active %s", draft, activeRelease(t, c))
	}
	if _, err := publish.Activate(ctx, c, "test", "", "", false); err == nil || !strings.Contains(err.Error(), "matches 2 recorded releases") {
		t.Errorf("Activate with an ambiguous prefix = %v", err)
	}
	a, err := publish.Activate(ctx, c, "test", draft.Release[:12], "", false)
	if err != nil {
		t.Fatal(err)
	}
	if a.From != first.Release || a.To != draft.Release || activeRelease(t, c) != draft.Release {
		t.Errorf("Activate by prefix: %+v", a)
	}
}

// TestPushChecksControldFirst: before it asks the store anything (and in a dry run too),
// a push recorded in controld fails on a missing token, a controld that does not answer,
// a token controld refuses, a token that may not push or activate on the repository, and
// an unknown repository, each with an error that says which; with the right token it
// pushes, and a push-only token records a draft.
func TestPushChecksControldFirst(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mem := store.NewMemory()
	c, url := newControld(t, mem)
	secret := func(name string, repos []string, actions ...string) *client.Client {
		t.Helper()
		out, err := c.CreateToken(ctx, name, repos, actions)
		if err != nil {
			t.Fatal(err)
		}
		return client.New(url, out.Secret, nil)
	}
	revoked := secret("old", []string{"test"}, "push", "activate")
	if _, err := c.RevokeToken(ctx, "old"); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadURL := "http://" + ln.Addr().String()
	ln.Close() // nothing listens there now
	errNoToken := errors.New("no controld token")
	pushOnly := secret("ci", []string{"test"}, "push")

	tests := []struct {
		name     string
		url      string
		client   func() (*client.Client, error)
		repo     string
		activate bool
		is       error
		want     []string
	}{
		{"no token", url, func() (*client.Client, error) { return nil, errNoToken }, "test", true, errNoToken, nil},
		{"controld down", deadURL, nil, "test", true, publish.ErrControldUnreachable,
			[]string{"controld " + deadURL + " does not answer", "check that controld runs there"}},
		{"not controld", notControld(t), nil, "test", true, publish.ErrControldUnreachable,
			[]string{"does not answer GET /v1/token"}},
		{"unknown token", url, constClient(client.New(url, "armor_not-a-token", nil)), "test", true, publish.ErrTokenRefused,
			[]string{"controld " + url + " refuses the token (from $TEST_TOKEN)", "unknown there or revoked"}},
		{"revoked token", url, constClient(revoked), "test", true, publish.ErrTokenRefused,
			[]string{"refuses the token", "revoked"}},
		{"other repository", url, constClient(secret("other", []string{"elsewhere"}, "push", "activate")), "test", true, publish.ErrTokenScope,
			[]string{"token other (from $TEST_TOKEN) may not push to repository test", "scoped to elsewhere", "--for test --action push --action activate"}},
		{"read only", url, constClient(secret("edge", []string{"*"}, "read")), "test", true, publish.ErrTokenScope,
			[]string{"token edge (from $TEST_TOKEN) may not push on repository test (it may read)"}},
		{"push may not activate", url, constClient(pushOnly), "test", true, publish.ErrTokenScope,
			[]string{"token ci (from $TEST_TOKEN) may not activate on repository test (it may push)", "--no-activate"}},
		{"unknown repository", url, constClient(c), "nope", true, publish.ErrUnknownRepository,
			[]string{"controld " + url + " has no repository nope", "armor repos create"}},
	}
	p := newPushProject(t, "")
	for _, tc := range tests {
		for _, dry := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/dry=%v", tc.name, dry), func(t *testing.T) {
				cl := tc.client
				if cl == nil {
					cl = constClient(client.New(tc.url, "armor_x", nil))
				}
				s := store.NewCounting(store.NewMemory())
				o := p.options(s, 2)
				o.DryRun = dry
				o.Controld = &publish.Controld{URL: tc.url, Repo: tc.repo, Activate: tc.activate, Client: cl, TokenSource: "$TEST_TOKEN"}
				res, err := publish.Push(ctx, o)
				if !errors.Is(err, tc.is) || res != nil {
					t.Fatalf("push = %+v, %v\nwant no result and an error matching %v", res, err, tc.is)
				}
				for _, w := range tc.want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("the error lacks %q:\n%v", w, err)
					}
				}
				if n := s.Counts(); n.Requests() != 0 {
					t.Errorf("the store was asked before controld was checked: %+v", n)
				}
				if st, _ := filepath.Glob(filepath.Join(p.cache(), "pushed-*")); len(st) != 0 {
					t.Errorf("a refused push wrote the pushed state %v", st)
				}
			})
		}
	}

	// A release of another repository is refused before any upload, though controld, the
	// token and the repository it would be recorded in are all fine.
	if _, err := c.CreateRepo(ctx, api.CreateRepoRequest{Name: "other", Hostnames: []string{"other.armor.test"}}); err != nil {
		t.Fatal(err)
	}
	s := store.NewCounting(store.NewMemory())
	o := p.options(s, 2)
	o.Controld = &publish.Controld{URL: url, Repo: "other", Activate: true, Client: constClient(c)}
	if res, err := publish.Push(ctx, o); !errors.Is(err, publish.ErrWrongRepository) || res != nil || !strings.Contains(err.Error(), "repository test, not of other") {
		t.Errorf("push of a release of test into other = %+v, %v; want ErrWrongRepository naming both", res, err)
	}
	if n := s.Counts(); n.Requests() != 0 {
		t.Errorf("a release of another repository was uploaded: %+v", n)
	}

	// The push-only token, not activating, records a draft.
	o = p.options(mem, 2)
	o.Controld = &publish.Controld{URL: url, Repo: "test", Client: constClient(pushOnly)}
	res, err := publish.Push(ctx, o)
	if err != nil || !res.Recorded || res.Activated {
		t.Fatalf("push with a push-only token, not activating = %+v, %v", res, err)
	}
}

func constClient(c *client.Client) func() (*client.Client, error) {
	return func() (*client.Client, error) { return c, nil }
}

// notControld is an HTTP server that is not controld: it answers 404 to everything.
func notControld(t *testing.T) string {
	hs := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(hs.Close)
	return hs.URL
}

// TestRepublish: a rollback re-signs the previous release's content as a new release on
// top of the current one, dated after it, and activates it.
func TestRepublish(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := store.NewMemory()
	c, url := newControld(t, s)
	p := newPushProject(t, "")
	first := pushTo(t, p, s, c, url, true)
	if _, err := synth.WriteOne(filepath.Join(p.dir, "debs"), "added", "1.0-1", "amd64", ""); err != nil {
		t.Fatal(err)
	}
	p.build(t)
	second := pushTo(t, p, s, c, url, true)

	st, err := publish.Previous(ctx, c, "test")
	if err != nil || st.Previous != first.Release {
		t.Fatalf("Previous = %+v, %v; want %s", st, err, first.Release)
	}
	// Asked for the first release's date, as a pipeline that keeps SOURCE_DATE_EPOCH at
	// its commit's time would: dated after the current release, recording the date asked
	// for, so that the next build at that date is not refused as older.
	asked, err := time.Parse(time.RFC3339, loadPushed(t, s, first.Manifest).Date)
	if err != nil {
		t.Fatal(err)
	}
	a, err := publish.Republish(ctx, publish.RepublishOptions{
		Client: c, URL: url, Repo: "test", Status: st, Store: s,
		Key:  func() (*sign.Key, error) { return loadTestKey(t), nil },
		Hash: crypto.SHA512, Cache: p.cache(), Date: asked,
	})
	if err != nil {
		t.Fatalf("Republish: %v", err)
	}
	if !a.Rollback || a.From != second.Release || activeRelease(t, c) != a.To {
		t.Errorf("activation %+v; want a rollback from %s", a, second.Release)
	}
	rel, err := c.Release(ctx, "test", a.To)
	if err != nil {
		t.Fatal(err)
	}
	next, err := publish.FetchManifest(ctx, s, rel.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	prev := loadPushed(t, s, first.Manifest)
	cur := loadPushed(t, s, second.Manifest)
	if next.Parent != second.Release || !manifest.EqualPackages(next.Packages, prev.Packages) {
		t.Errorf("rollback release: parent %s, %d packages; want parent %s and the %d packages of %s",
			next.Parent, len(next.Packages), second.Release, len(prev.Packages), first.Release)
	}
	if got, was := releaseDate(t, s, next), releaseDate(t, s, cur); !got.After(was) {
		t.Errorf("the re-signed Release is dated %v, not after the current one's %v", got, was)
	}
	if next.RequestedDate != asked.Format(time.RFC3339) {
		t.Errorf("the rollback release's requested_date is %q, want the date asked for, %s", next.RequestedDate, asked.Format(time.RFC3339))
	}
	if tmp, _ := filepath.Glob(filepath.Join(p.cache(), "rollback-*")); len(tmp) != 0 {
		t.Errorf("Republish left its staging %v", tmp)
	}
}

func loadPushed(t *testing.T, s store.Store, sum string) *manifest.Manifest {
	t.Helper()
	m, err := publish.FetchManifest(context.Background(), s, sum)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// releaseDate is the Date of the suite's Release in m.
func releaseDate(t *testing.T, s store.Store, m *manifest.Manifest) time.Time {
	t.Helper()
	o, ok := m.Paths()["dists/stable/Release"]
	if !ok {
		t.Fatalf("release %s has no dists/stable/Release", m.ID)
	}
	data, err := publish.FetchObject(context.Background(), s, o.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	d, err := release.Date(data)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// clone copies the project (manifest, tree and cache) into a new directory: another
// pipeline starting from the same parent.
func (p pushProject) clone(t *testing.T) pushProject {
	t.Helper()
	q := pushProject{dir: t.TempDir(), remote: p.remote}
	if err := os.CopyFS(q.dir, os.DirFS(p.dir)); err != nil {
		t.Fatal(err)
	}
	return q
}

// add writes one new package into the project and builds it: a release whose parent is
// the project's last release.
func (p pushProject) add(t *testing.T, name string) *manifest.Manifest {
	t.Helper()
	if _, err := synth.WriteOne(filepath.Join(p.dir, "debs"), name, "1.0-1", "amd64", ""); err != nil {
		t.Fatal(err)
	}
	p.build(t)
	return loadManifest(t, p.manifestPath())
}

// activeManifest is the manifest of the release active in controld.
func activeManifest(t *testing.T, c *client.Client, s store.Store) *manifest.Manifest {
	t.Helper()
	rel, err := c.Release(context.Background(), "test", activeRelease(t, c))
	if err != nil {
		t.Fatal(err)
	}
	return loadPushed(t, s, rel.Manifest)
}

func hasPackage(m *manifest.Manifest, name string) bool {
	return slices.ContainsFunc(m.Packages, func(p manifest.Package) bool { return p.Name == name })
}

// checkRefused fails unless err is the refusal of the push res (built on parent) because
// active is the active release, naming both and saying what to do, with nothing recorded.
func checkRefused(t *testing.T, c *client.Client, res *publish.PushResult, err error, parent, active string) {
	t.Helper()
	var stale *publish.StaleParentError
	if res == nil || !errors.As(err, &stale) {
		t.Fatalf("push built on %.12s while %.12s is active: %v (%T), want a *publish.StaleParentError", parent, active, err, err)
	}
	if stale.Release != res.Release || stale.Parent != parent || stale.Active != active {
		t.Errorf("refusal names release %.12s built on %.12s, active %.12s; want %.12s on %.12s, active %.12s",
			stale.Release, stale.Parent, stale.Active, res.Release, parent, active)
	}
	built := "first release (no parent)"
	if parent != "" {
		built = "was built on " + parent[:12]
	}
	for _, want := range []string{"release " + res.Release[:12], built, "the active release is " + active[:12],
		"another release was activated since this one was built: run armor push --rebase (it applies this release's change again on the active release, and pushes that), or build on the active release with armor build --from-active and push again",
		"nothing was activated"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal lacks %q: %v", want, err)
		}
	}
	if res.Recorded || res.Activated || res.Parent != parent {
		t.Errorf("refused push result: %+v", res)
	}
	rels, lerr := c.Releases(context.Background(), "test")
	if lerr != nil {
		t.Fatal(lerr)
	}
	for _, r := range rels {
		if r.ID == res.Release {
			t.Errorf("the refused release %.12s was recorded", res.Release)
		}
	}
	if got := activeRelease(t, c); got != active {
		t.Errorf("after the refused push %.12s is active, want %.12s", got, active)
	}
}

// TestPushActivatesOnItsParent: two releases built on the same parent, pushed one after
// the other: the first activates; the second is refused, names the active release and
// its parent, records nothing, and the active release keeps the first one's package.
// Pushing the active release again still succeeds, without a flip.
func TestPushActivatesOnItsParent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := store.NewMemory()
	c, url := newControld(t, s)
	p := newPushProject(t, "")
	base := pushTo(t, p, s, c, url, true)
	q := p.clone(t)
	p.add(t, "alpha")
	q.add(t, "beta")

	first := pushTo(t, p, s, c, url, true)
	if !first.Activated || first.Parent != base.Release {
		t.Fatalf("first push on the parent: %+v", first)
	}
	second, err := pushRecord(q, s, c, url, true)
	checkRefused(t, c, second, err, base.Release, first.Release)
	if m := activeManifest(t, c, s); !hasPackage(m, "alpha") || hasPackage(m, "beta") {
		t.Errorf("the active release %.12s: alpha %v, beta %v; want alpha only", m.ID, hasPackage(m, "alpha"), hasPackage(m, "beta"))
	}

	// As after a push that died once it had activated: run again, it finishes.
	again, err := pushRecord(p, s, c, url, true)
	if err != nil || !again.Recorded || !again.Activated {
		t.Fatalf("push of the active release again: %+v, %v; want recorded and active", again, err)
	}
	if h, err := c.History(ctx, "test"); err != nil || len(h) != 2 {
		t.Errorf("history: %d activations (%v), want 2", len(h), err)
	}
}

// TestPushAnswerLost: a push whose activation controld committed but whose answer was
// lost (the replica died before answering) is run again after another pipeline's release,
// built on it, was activated. The compare-and-swap fails, but the push did not lose a
// race: its own first attempt won it. It reports its release activated, not stale.
func TestPushAnswerLost(t *testing.T) {
	t.Parallel()
	s := store.NewMemory()
	c, url := newControld(t, s)
	p := newPushProject(t, "")
	pushTo(t, p, s, c, url, true)
	p.add(t, "alpha")
	first := pushTo(t, p, s, c, url, true) // its answer is taken as lost
	q := p.clone(t)
	q.add(t, "beta")
	later := pushTo(t, q, s, c, url, true)
	if !later.Activated || later.Parent != first.Release {
		t.Fatalf("the release built on the first: %+v", later)
	}

	again, err := pushRecord(p, s, c, url, true)
	if err != nil || !again.Recorded || !again.Activated || again.Release != first.Release {
		t.Fatalf("push run again after its answer was lost: %+v, %v; want its release %.12s reported activated", again, err, first.Release)
	}
	if got := activeRelease(t, c); got != later.Release {
		t.Errorf("active %.12s, want %.12s: the release run again must not replace its successor", got, later.Release)
	}
}

// TestPushFirstReleaseRefusedWhenActive: a release built as a repository's first (no
// parent) is refused once the repository has an active release, naming it.
func TestPushFirstReleaseRefusedWhenActive(t *testing.T) {
	t.Parallel()
	s := store.NewMemory()
	c, url := newControld(t, s)
	active := pushTo(t, newPushProject(t, ""), s, c, url, true)

	q := pushProject{dir: t.TempDir()}
	if _, err := synth.Write(filepath.Join(q.dir, "debs"), synth.Options{N: 3, Seed: 2}); err != nil {
		t.Fatal(err)
	}
	q.build(t)
	res, err := pushRecord(q, s, c, url, true)
	checkRefused(t, c, res, err, "", active.Release)
}

// TestPushRace: two pushes built on the same parent, run at once, a few times over: each
// time exactly one activates, the other is refused, and the active release holds every
// winner's package so far.
func TestPushRace(t *testing.T) {
	t.Parallel()
	s := store.NewMemory()
	c, url := newControld(t, s)
	w := newPushProject(t, "")
	parent := pushTo(t, w, s, c, url, true).Release
	var won []string
	for i := range 3 {
		racers := []pushProject{w.clone(t), w.clone(t)}
		names := []string{fmt.Sprintf("race%d-a", i), fmt.Sprintf("race%d-b", i)}
		for k, r := range racers {
			r.add(t, names[k])
		}
		results := make([]*publish.PushResult, 2)
		errs := make([]error, 2)
		var wg sync.WaitGroup
		for k, r := range racers {
			wg.Go(func() { results[k], errs[k] = pushRecord(r, s, c, url, true) })
		}
		wg.Wait()
		winner := -1
		for k := range racers {
			if errs[k] == nil && results[k].Activated {
				if winner >= 0 {
					t.Fatalf("round %d: both pushes activated", i)
				}
				winner = k
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: no push activated: %v; %v", i, errs[0], errs[1])
		}
		loser := 1 - winner
		checkRefused(t, c, results[loser], errs[loser], parent, results[winner].Release)
		won = append(won, names[winner])
		m := activeManifest(t, c, s)
		for _, name := range won {
			if !hasPackage(m, name) {
				t.Errorf("round %d: the active release lacks %s", i, name)
			}
		}
		if hasPackage(m, names[loser]) {
			t.Errorf("round %d: the active release has the loser's %s", i, names[loser])
		}
		w, parent = racers[winner], results[winner].Release
	}
}
