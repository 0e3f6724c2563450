package statetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/armor-apt/armor/controld/state"
)

// Open returns a fresh, empty store for one test; it closes the store with t.Cleanup.
type Open func(t *testing.T) state.Store

// t0 is the suite's clock origin.
var t0 = time.Date(2026, 11, 22, 8, 0, 0, 0, time.UTC)

// Run runs every test of the suite against stores made by open.
func Run(t *testing.T, open Open) {
	tests := []struct {
		name string
		fn   func(t *testing.T, st state.Store)
	}{
		{"repositories", testRepositories},
		{"hostnames", testHostnames},
		{"keys", testKeys},
		{"retention", testRetention},
		{"record", testRecord},
		{"activate", testActivate},
		{"rollback", testRollback},
		{"rolled back", testRolledBack},
		{"record and activate", testRecordActivate},
		{"concurrent activations", testConcurrentActivations},
		{"tokens", testTokens},
		{"version", testVersion},
		{"delete release", testDeleteRelease},
		{"delete while activating", testDeleteWhileActivating},
		{"missing objects", testMissing},
		{"hook events", testHookEvents},
		{"hook claims", testHookClaims},
		{"concurrent hook claims", testConcurrentClaims},
		{"certificate files", testCertFiles},
		{"certificate locks", testCertLocks},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := open(t)
			tc.fn(t, st)
			if err := state.Verify(context.Background(), st); err != nil {
				t.Errorf("state inconsistent after the test: %v", err)
			}
		})
	}
}

// ID returns a fake 64-hex release id or digest derived from s.
func ID(s string) string {
	h := fmt.Sprintf("%x", s)
	return (h + strings.Repeat("0", 64))[:64]
}

// must(v, err)(t) returns v, or fails t with err.
func must[T any](v T, err error) func(t *testing.T) T {
	return func(t *testing.T) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func mustErr(t *testing.T, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("error = %v, want %v", err, want)
	}
}

func newRepo(t *testing.T, st state.Store, name string, hosts ...string) {
	t.Helper()
	err := st.CreateRepository(context.Background(), state.Repository{
		Name: name, Hostnames: hosts, Retention: 48 * time.Hour, CreatedAt: t0, CreatedBy: "admin",
	})
	if err != nil {
		t.Fatalf("create repository %s: %v", name, err)
	}
}

func release(repo, id, parent string) state.Release {
	return state.Release{
		Repository: repo, ID: ID(id), Manifest: ID("m" + id), Parent: parent,
		Files: 3, PushedBy: "ci", PushedAt: t0,
		Suites: map[string]state.Suite{"dists/stable": {Date: "2026-11-22T08:00:00Z", InRelease: ID("in" + id)}},
	}
}

func record(t *testing.T, st state.Store, rel state.Release) state.Release {
	t.Helper()
	out, err := st.RecordRelease(context.Background(), rel, nil)
	if err != nil {
		t.Fatalf("record %s: %v", rel.ID, err)
	}
	return out.Release
}

func activate(t *testing.T, st state.Store, repo, to, expect string, at time.Time) state.Activation {
	t.Helper()
	a, err := st.Activate(context.Background(), state.Flip{Repository: repo, To: to, Expect: expect, By: "ci", At: at})
	if err != nil {
		t.Fatalf("activate %s (expect %q): %v", to, expect, err)
	}
	return a
}

func testRepositories(t *testing.T, st state.Store) {
	ctx := context.Background()
	newRepo(t, st, "zeta")
	newRepo(t, st, "alpha")
	mustErr(t, st.CreateRepository(ctx, state.Repository{Name: "alpha"}), state.ErrExists)
	_, err := st.Repository(ctx, "nope")
	mustErr(t, err, state.ErrNotFound)
	r := must(st.Repository(ctx, "alpha"))(t)
	if r.Name != "alpha" || r.Retention != 48*time.Hour || !r.CreatedAt.Equal(t0) || r.CreatedBy != "admin" || r.Active != nil {
		t.Errorf("repository = %+v", r)
	}
	all := must(st.Repositories(ctx))(t)
	if len(all) != 2 || all[0].Name != "alpha" || all[1].Name != "zeta" {
		t.Errorf("repositories = %+v, want alpha, zeta", all)
	}
	for _, fn := range []func() error{
		func() error { _, err := st.Releases(ctx, "nope"); return err },
		func() error { _, err := st.History(ctx, "nope"); return err },
		func() error { _, err := st.AddHostnames(ctx, "nope", []string{"x.test"}); return err },
		func() error { _, err := st.RecordRelease(ctx, release("nope", "a", ""), nil); return err },
	} {
		mustErr(t, fn(), state.ErrNotFound)
	}
}

func testHostnames(t *testing.T, st state.Store) {
	ctx := context.Background()
	newRepo(t, st, "a", "b.test", "a.test")
	r := must(st.Repository(ctx, "a"))(t)
	if strings.Join(r.Hostnames, ",") != "a.test,b.test" {
		t.Errorf("hostnames = %v, want sorted a.test,b.test", r.Hostnames)
	}
	err := st.CreateRepository(ctx, state.Repository{Name: "b", Hostnames: []string{"c.test", "a.test"}})
	var taken *state.HostnameTakenError
	if !errors.As(err, &taken) || taken.Hostname != "a.test" || taken.Owner != "a" {
		t.Fatalf("create with a taken hostname: %v, want HostnameTakenError(a.test, a)", err)
	}
	_, err = st.Repository(ctx, "b")
	mustErr(t, err, state.ErrNotFound)

	newRepo(t, st, "b", "c.test")
	_, err = st.AddHostnames(ctx, "b", []string{"d.test", "b.test"})
	mustErr(t, err, state.ErrHostnameTaken)
	r = must(st.Repository(ctx, "b"))(t)
	if strings.Join(r.Hostnames, ",") != "c.test" {
		t.Errorf("after a refused claim hostnames = %v, want c.test only", r.Hostnames)
	}
	// d.test was not claimed by the failed call, so a can take it.
	r = must(st.AddHostnames(ctx, "a", []string{"d.test", "a.test"}))(t)
	if strings.Join(r.Hostnames, ",") != "a.test,b.test,d.test" {
		t.Errorf("hostnames = %v", r.Hostnames)
	}
}

func testKeys(t *testing.T, st state.Store) {
	ctx := context.Background()
	newRepo(t, st, "a")
	must(st.AddKey(ctx, "a", state.Key{Fingerprint: "AAAA", Armored: "one"}))(t)
	must(st.AddKey(ctx, "a", state.Key{Fingerprint: "BBBB", Armored: "two"}))(t)
	r := must(st.AddKey(ctx, "a", state.Key{Fingerprint: "AAAA", Armored: "one again"}))(t)
	if len(r.Keys) != 2 || r.Keys[0].Fingerprint != "BBBB" || r.Keys[1].Armored != "one again" {
		t.Errorf("keys = %+v, want BBBB then the replaced AAAA", r.Keys)
	}
	r = must(st.RemoveKey(ctx, "a", "bbbb", "admin", t0))(t)
	if len(r.Keys) != 1 || r.Keys[0].Fingerprint != "AAAA" {
		t.Errorf("keys after removal = %+v", r.Keys)
	}
	_, err := st.RemoveKey(ctx, "a", "CCCC", "admin", t0)
	mustErr(t, err, state.ErrNotFound)
	if r := must(st.Repository(ctx, "a"))(t); len(r.Keys) != 1 {
		t.Errorf("stored keys = %+v", r.Keys)
	}
}

func testRetention(t *testing.T, st state.Store) {
	ctx := context.Background()
	newRepo(t, st, "a")
	must(st.SetRetention(ctx, "a", time.Hour))(t)
	if r := must(st.Repository(ctx, "a"))(t); r.Retention != time.Hour {
		t.Errorf("retention = %v, want 1h", r.Retention)
	}
}

func testRecord(t *testing.T, st state.Store) {
	ctx := context.Background()
	newRepo(t, st, "a")
	newRepo(t, st, "b")
	_, err := st.RecordRelease(ctx, release("a", "one", ID("ghost")), nil)
	mustErr(t, err, state.ErrUnknownParent)
	one := record(t, st, release("a", "one", ""))
	if one.Seq == 0 || one.PushedBy != "ci" || one.Files != 3 {
		t.Errorf("recorded %+v", one)
	}
	_, err = st.RecordRelease(ctx, release("a", "orphan", ""), nil)
	mustErr(t, err, state.ErrUnknownParent)
	// A parent recorded in another repository is unknown here.
	_, err = st.RecordRelease(ctx, release("b", "x", ID("one")), nil)
	mustErr(t, err, state.ErrUnknownParent)

	again := release("a", "one", "")
	again.PushedBy, again.PushedAt = "someone else", t0.Add(time.Hour)
	out := must(st.RecordRelease(ctx, again, nil))(t)
	if out.Created || !reflect.DeepEqual(out.Release, one) {
		t.Errorf("re-recording gave %+v (created %v), want the original %+v", out.Release, out.Created, one)
	}
	two := record(t, st, release("a", "two", ID("one")))
	if got := must(st.Release(ctx, "a", ID("two")))(t); !reflect.DeepEqual(got, two) {
		t.Errorf("Release = %+v, want %+v", got, two)
	}
	_, err = st.Release(ctx, "b", ID("two"))
	mustErr(t, err, state.ErrNotFound)
	rels := must(st.Releases(ctx, "a"))(t)
	if len(rels) != 2 || rels[0].ID != ID("one") || rels[1].ID != ID("two") {
		t.Errorf("releases = %+v, want one, two", rels)
	}
}

func testActivate(t *testing.T, st state.Store) {
	ctx := context.Background()
	newRepo(t, st, "a")
	one := record(t, st, release("a", "one", ""))
	two := record(t, st, release("a", "two", one.ID))

	_, err := st.Activate(ctx, state.Flip{Repository: "a", To: ID("ghost"), By: "ci", At: t0})
	mustErr(t, err, state.ErrNotFound)
	a1 := activate(t, st, "a", one.ID, "", t0.Add(time.Minute))
	if a1.Seq != 1 || a1.From != "" || a1.To != one.ID || a1.By != "ci" {
		t.Errorf("first activation = %+v", a1)
	}
	_, err = st.Activate(ctx, state.Flip{Repository: "a", To: two.ID, Expect: "", By: "ci", At: t0})
	var conflict *state.ConflictError
	if !errors.As(err, &conflict) || conflict.Active != one.ID || conflict.Expected != "" {
		t.Fatalf("stale expectation: %v, want ConflictError naming %s", err, one.ID)
	}
	same := activate(t, st, "a", one.ID, one.ID, t0.Add(2*time.Minute))
	if same != a1 {
		t.Errorf("re-activating the active release = %+v, want the unchanged %+v", same, a1)
	}
	at2 := t0.Add(3 * time.Minute)
	a2 := activate(t, st, "a", two.ID, one.ID, at2)
	if a2.Seq != 2 || a2.From != one.ID || a2.To != two.ID {
		t.Errorf("second activation = %+v", a2)
	}
	r := must(st.Repository(ctx, "a"))(t)
	if r.Active == nil || r.Active.Release != two.ID || r.Active.Manifest != two.Manifest || !r.Active.At.Equal(at2) {
		t.Errorf("active = %+v, want %s at %v", r.Active, two.ID, at2)
	}
	if len(r.Retired) != 1 || r.Retired[0].Release != one.ID || r.Retired[0].Manifest != one.Manifest || !r.Retired[0].DeactivatedAt.Equal(at2) {
		t.Errorf("retired = %+v, want one deactivated at %v", r.Retired, at2)
	}
	hist := must(st.History(ctx, "a"))(t)
	if len(hist) != 2 || hist[0] != a1 || hist[1] != a2 {
		t.Errorf("history = %+v", hist)
	}
	// Back to one: it leaves the retired list and two enters it.
	at3 := t0.Add(4 * time.Minute)
	activate(t, st, "a", one.ID, two.ID, at3)
	r = must(st.Repository(ctx, "a"))(t)
	if len(r.Retired) != 1 || r.Retired[0].Release != two.ID || !r.Retired[0].DeactivatedAt.Equal(at3) {
		t.Errorf("retired = %+v, want only two", r.Retired)
	}
}

func testRollback(t *testing.T, st state.Store) {
	ctx := context.Background()
	newRepo(t, st, "a")
	one := record(t, st, release("a", "one", ""))
	two := record(t, st, release("a", "two", one.ID))
	rollback := func(expect string) (state.Activation, error) {
		return st.Activate(ctx, state.Flip{Repository: "a", Expect: expect, Rollback: true, By: "ops", At: t0})
	}
	_, err := rollback("")
	mustErr(t, err, state.ErrNoPrevious)
	activate(t, st, "a", one.ID, "", t0)
	_, err = rollback(one.ID)
	mustErr(t, err, state.ErrNoPrevious)
	activate(t, st, "a", two.ID, one.ID, t0)
	_, err = rollback(one.ID)
	mustErr(t, err, state.ErrConflict)
	a := must(rollback(two.ID))(t)
	if a.From != two.ID || a.To != one.ID || !a.Rollback || a.By != "ops" {
		t.Errorf("rollback = %+v, want two → one", a)
	}
	if r := must(st.Repository(ctx, "a"))(t); r.Active.Release != one.ID {
		t.Errorf("active after rollback = %s, want one", r.Active.Release)
	}
}

func testRecordActivate(t *testing.T, st state.Store) {
	ctx := context.Background()
	newRepo(t, st, "a")
	one := release("a", "one", "")
	out := must(st.RecordRelease(ctx, one, &state.Flip{Expect: "", By: "ci", At: t0}))(t)
	if !out.Created || out.Activation == nil || out.Activation.To != one.ID {
		t.Fatalf("record+activate = %+v", out)
	}
	two := release("a", "two", one.ID)
	_, err := st.RecordRelease(ctx, two, &state.Flip{Expect: ID("stale"), By: "ci", At: t0})
	var conflict *state.ConflictError
	if !errors.As(err, &conflict) || conflict.Active != one.ID {
		t.Fatalf("record+activate with a stale expectation: %v", err)
	}
	_, err = st.Release(ctx, "a", two.ID)
	mustErr(t, err, state.ErrNotFound)
	// Re-recording a known release can still activate it.
	record(t, st, two)
	out = must(st.RecordRelease(ctx, two, &state.Flip{Expect: one.ID, By: "ci", At: t0}))(t)
	if out.Created || out.Activation == nil || out.Activation.From != one.ID {
		t.Errorf("re-record+activate = %+v", out)
	}
}

func testConcurrentActivations(t *testing.T, st state.Store) {
	ctx := context.Background()
	newRepo(t, st, "a")
	const n = 8
	prev := ""
	for round := range 3 {
		var ids []string
		for i := range n {
			rel := release("a", fmt.Sprintf("r%d-%d", round, i), "")
			if round > 0 || i > 0 {
				rel.Parent = ID("r0-0")
			}
			ids = append(ids, record(t, st, rel).ID)
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		var won []string
		for _, id := range ids {
			wg.Go(func() {
				_, err := st.Activate(ctx, state.Flip{Repository: "a", To: id, Expect: prev, By: "ci", At: t0})
				switch {
				case err == nil:
					mu.Lock()
					won = append(won, id)
					mu.Unlock()
				case !errors.Is(err, state.ErrConflict):
					t.Errorf("activate %s: %v", id, err)
				}
			})
		}
		wg.Wait()
		if len(won) != 1 {
			t.Fatalf("round %d: %d activations won, want exactly 1", round, len(won))
		}
		prev = won[0]
	}
	if hist := must(st.History(ctx, "a"))(t); len(hist) != 3 {
		t.Errorf("history has %d entries, want 3", len(hist))
	}
}

func testTokens(t *testing.T, st state.Store) {
	ctx := context.Background()
	tok := state.Token{Name: "edge", Hash: ID("secret"), Repositories: []string{"*"}, Actions: []string{"read"}, CreatedAt: t0, CreatedBy: "admin"}
	if err := st.CreateToken(ctx, tok); err != nil {
		t.Fatal(err)
	}
	mustErr(t, st.CreateToken(ctx, state.Token{Name: "edge", Hash: ID("other")}), state.ErrExists)
	mustErr(t, st.CreateToken(ctx, state.Token{Name: "other", Hash: ID("secret")}), state.ErrExists)
	if err := st.CreateToken(ctx, state.Token{Name: "ci", Hash: ID("ci"), Repositories: []string{"a"}, Actions: []string{"push"}}); err != nil {
		t.Fatal(err)
	}
	got := must(st.TokenByHash(ctx, ID("secret")))(t)
	if got.Name != "edge" || got.Repositories[0] != "*" || got.Revoked() {
		t.Errorf("token = %+v", got)
	}
	_, err := st.TokenByHash(ctx, ID("nope"))
	mustErr(t, err, state.ErrNotFound)
	r1 := must(st.RevokeToken(ctx, "edge", "admin", t0.Add(time.Hour)))(t)
	r2 := must(st.RevokeToken(ctx, "edge", "other", t0.Add(2*time.Hour)))(t)
	if !r1.Revoked() || !r2.RevokedAt.Equal(t0.Add(time.Hour)) || r2.RevokedBy != "admin" {
		t.Errorf("revocations = %+v then %+v, want the first kept", r1, r2)
	}
	if got := must(st.TokenByHash(ctx, ID("secret")))(t); !got.Revoked() {
		t.Error("revoked token reads as not revoked")
	}
	_, err = st.RevokeToken(ctx, "nope", "admin", t0)
	mustErr(t, err, state.ErrNotFound)
	all := must(st.Tokens(ctx))(t)
	if len(all) != 2 || all[0].Name != "ci" || all[1].Name != "edge" {
		t.Errorf("tokens = %+v, want ci, edge", all)
	}
}

func testVersion(t *testing.T, st state.Store) {
	ctx := context.Background()
	v := must(st.Version(ctx))(t)
	if v != 1 {
		t.Errorf("fresh store version = %d, want 1", v)
	}
	step := func(name string, bumps bool, fn func() error) {
		t.Helper()
		before := must(st.Version(ctx))(t)
		if err := fn(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		after := must(st.Version(ctx))(t)
		if bumps && after != before+1 || !bumps && after != before {
			t.Errorf("%s: version %d → %d, want bump=%v", name, before, after, bumps)
		}
	}
	one := release("a", "one", "")
	step("create repository", true, func() error { return st.CreateRepository(ctx, state.Repository{Name: "a"}) })
	step("add hostname", true, func() error { _, err := st.AddHostnames(ctx, "a", []string{"a.test"}); return err })
	step("add known hostname", false, func() error { _, err := st.AddHostnames(ctx, "a", []string{"a.test"}); return err })
	step("add key", true, func() error { _, err := st.AddKey(ctx, "a", state.Key{Fingerprint: "AA"}); return err })
	step("remove key", true, func() error { _, err := st.RemoveKey(ctx, "a", "AA", "admin", t0); return err })
	step("set retention", true, func() error { _, err := st.SetRetention(ctx, "a", time.Hour); return err })
	step("record", false, func() error { _, err := st.RecordRelease(ctx, one, nil); return err })
	step("activate", true, func() error { _, err := st.Activate(ctx, state.Flip{Repository: "a", To: one.ID, At: t0}); return err })
	step("re-activate", false, func() error {
		_, err := st.Activate(ctx, state.Flip{Repository: "a", To: one.ID, Expect: one.ID, At: t0})
		return err
	})
	step("bump", true, func() error { _, err := st.BumpVersion(ctx); return err })
	snap := must(st.Snapshot(ctx))(t)
	if snap.Version != must(st.Version(ctx))(t) || len(snap.Repositories) != 1 || snap.Repositories[0].Active == nil {
		t.Errorf("snapshot = %+v", snap)
	}
}
