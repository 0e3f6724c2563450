package controld_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/armor-apt/armor/controld"
	"github.com/armor-apt/armor/controld/api"
	"github.com/armor-apt/armor/controld/client"
	"github.com/armor-apt/armor/internal/duration"
	"github.com/armor-apt/armor/manifest"
	"github.com/armor-apt/armor/store"
	"github.com/armor-apt/armor/store/storetest"
)

// gcConfig keeps only what the rules protect, so a test sees releases go.
var gcConfig = controld.Config{
	GCKeepLast:   1,
	GCKeepDrafts: duration.Duration(time.Hour),
	GCGrace:      duration.Duration(24 * time.Hour),
}

// pushed is a release of the fixture: its id and every object it needs.
type pushed struct {
	id      string
	objects map[string]int64 // digest → size, the manifest included
}

// push publishes and records (and activates) release version on the active one.
func (f *fixture) push(repo, version string, activate bool) pushed {
	f.t.Helper()
	ctx := context.Background()
	parent := ""
	if st, err := f.admin.Status(ctx, repo); err != nil {
		f.t.Fatal(err)
	} else if st.Active != nil {
		parent = st.Active.Release
	}
	tr := newTree(f.t, repo, parent, version, f.key)
	sum := tr.publish(f.t, f.store)
	expect := parent
	if !activate {
		expect = ""
	}
	if _, err := f.admin.RecordRelease(ctx, repo, sum, activate, expect); err != nil {
		f.t.Fatalf("record %s: %v", version, err)
	}
	p := pushed{id: tr.m.ID, objects: map[string]int64{}}
	for _, o := range tr.m.Objects() {
		p.objects[o.SHA256] = o.Size
	}
	data, _ := manifest.Marshal(tr.m)
	p.objects[sum] = int64(len(data))
	return p
}

// holds fails t unless the store holds every object of every release.
func (f *fixture) holds(rels ...pushed) {
	f.t.Helper()
	for _, r := range rels {
		storetest.CheckHolds(f.t, f.store, r.objects)
	}
}

// only returns the objects of r that none of others has.
func (r pushed) only(others ...pushed) map[string]int64 {
	out := map[string]int64{}
	for sum, size := range r.objects {
		shared := false
		for _, o := range others {
			if _, ok := o.objects[sum]; ok {
				shared = true
			}
		}
		if !shared {
			out[sum] = size
		}
	}
	return out
}

func TestGC(t *testing.T) {
	f := newFixtureWith(t, gcConfig, nil)
	ctx := context.Background()
	f.repo("demo")
	if _, err := f.admin.SetRetention(ctx, "demo", time.Hour); err != nil {
		t.Fatal(err)
	}
	v1 := f.push("demo", "1.0", true)
	f.clock.Add(time.Hour)
	v2 := f.push("demo", "2.0", true)
	f.clock.Add(time.Hour)
	v3 := f.push("demo", "3.0", true)
	f.clock.Add(time.Hour)
	v4 := f.push("demo", "4.0", true)
	draft := f.push("demo", "5.0-draft", false)
	orphan := put(t, f.store, []byte("uploaded by a push that never recorded its release"))
	f.clock.Add(48 * time.Hour) // v1-v3 out of the window; drafts and orphans old
	young := put(t, f.store, []byte("uploaded by a push in flight"))
	f.clock.Add(time.Minute)

	before := storetest.List(t, f.store)
	dry, err := f.admin.GC(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	if got := storetest.List(t, f.store); len(got) != len(before) {
		t.Fatalf("a dry run changed the store: %d objects, was %d", len(got), len(before))
	}
	if rels, _ := f.admin.Releases(ctx, "demo"); len(rels) != 5 {
		t.Fatalf("a dry run deleted releases: %d left of 5", len(rels))
	}

	// v4 is active, v3 what a rollback activates; v1, v2 and the old draft go.
	garbage := map[string]int64{orphan: int64(len("uploaded by a push that never recorded its release"))}
	for _, r := range []pushed{v1, v2, draft} {
		for sum, size := range r.only(v3, v4) {
			garbage[sum] = size
		}
	}
	var garbageBytes int64
	for _, size := range garbage {
		garbageBytes += size
	}
	rep, err := f.admin.GC(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []*api.GCReport{dry, rep} {
		ids := []string{}
		for _, rel := range r.Releases {
			ids = append(ids, rel.ID)
		}
		want := []string{v1.id, v2.id, draft.id}
		if strings.Join(ids, ",") != strings.Join(want, ",") {
			t.Errorf("dry run %v: releases deleted %v, want v1, v2 and the draft %v", r.DryRun, ids, want)
		}
		if r.Deleted != len(garbage) || r.DeletedBytes != garbageBytes || r.Young != 1 || r.KeptReleases != 2 || r.Objects != len(before) {
			t.Errorf("dry run %v: report %+v; want %d objects (%d bytes) deleted of %d, 1 young, 2 releases kept",
				r.DryRun, r, len(garbage), garbageBytes, len(before))
		}
	}
	after := storetest.List(t, f.store)
	if len(after) != len(before)-len(garbage) {
		t.Errorf("store has %d objects after gc, want %d - %d", len(after), len(before), len(garbage))
	}
	for sum := range garbage {
		storetest.AssertAbsent(t, f.store, sum)
	}
	f.holds(v3, v4)
	if _, ok := after[young]; !ok {
		t.Errorf("an unreferenced object younger than the grace period was deleted")
	}
	rels, err := f.admin.Releases(ctx, "demo")
	if err != nil || len(rels) != 2 || rels[0].ID != v3.id || rels[1].ID != v4.id {
		t.Errorf("releases after gc = %+v, %v; want v3, v4", rels, err)
	}
	// Rollback still works: its target was kept.
	if _, err := f.admin.Rollback(ctx, "demo", v4.id); err != nil {
		t.Errorf("rollback after gc: %v", err)
	}

	// Nothing left to collect.
	again, err := f.admin.GC(ctx, false)
	if err != nil || again.Deleted != 0 || len(again.Releases) != 0 {
		t.Errorf("second gc = %+v, %v; want nothing deleted", again, err)
	}
}

func TestDeleteRelease(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.repo("demo")
	v1 := f.push("demo", "1.0", true)
	v2 := f.push("demo", "2.0", true)
	v3 := f.push("demo", "3.0", true)
	v4 := f.push("demo", "4.0", true)
	f.clock.Add(49 * time.Hour) // past the default 48h window for v1 and v2

	for _, tc := range []struct {
		name, id, want string
	}{
		{"active", v4.id, "it is the active release"},
		{"rollback target", v3.id, "armor rollback would activate"},
	} {
		before := f.snapshot()
		_, err := f.admin.DeleteRelease(ctx, "demo", tc.id)
		e := wantStatus(t, err, http.StatusConflict)
		if e.Code != api.CodeKept || !strings.Contains(e.Message, tc.want) || !strings.Contains(e.Message, tc.id) {
			t.Errorf("deleting the %s: %v; want code %s naming it and saying %q", tc.name, e, api.CodeKept, tc.want)
		}
		if f.snapshot() != before {
			t.Errorf("refused deletion of the %s changed the state", tc.name)
		}
	}
	// v2 was deactivated when v3 became active: set the window so it is still retained.
	if _, err := f.admin.SetRetention(ctx, "demo", 100*time.Hour); err != nil {
		t.Fatal(err)
	}
	_, err := f.admin.DeleteRelease(ctx, "demo", v2.id)
	if e := wantStatus(t, err, http.StatusConflict); !strings.Contains(e.Message, "retention window") {
		t.Errorf("deleting a retained release: %v, want a refusal naming the retention window", e)
	}
	if _, err := f.admin.SetRetention(ctx, "demo", time.Hour); err != nil {
		t.Fatal(err)
	}

	pusher := f.token("ci", []string{"demo"}, "push", "activate")
	_, err = pusher.DeleteRelease(ctx, "demo", v1.id)
	wantStatus(t, err, http.StatusForbidden)
	_, err = f.admin.DeleteRelease(ctx, "demo", strings.Repeat("0", 64))
	wantStatus(t, err, http.StatusNotFound)

	rel, err := f.admin.DeleteRelease(ctx, "demo", v1.id)
	if err != nil || rel.ID != v1.id {
		t.Fatalf("delete v1 = %+v, %v", rel, err)
	}
	_, err = f.admin.Release(ctx, "demo", v1.id)
	wantStatus(t, err, http.StatusNotFound)
	_, err = f.admin.Activate(ctx, "demo", v1.id, v4.id)
	wantStatus(t, err, http.StatusNotFound)
	// Deleting records only: the objects wait for gc.
	f.holds(v1)
}

func TestGCNeedsAdminOfEveryRepository(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.repo("demo")
	for _, tok := range []*client.Client{
		f.token("demo-admin", []string{"demo"}, "admin"),
		f.token("everything-but-admin", []string{"*"}, "read", "push", "activate"),
	} {
		_, err := tok.GC(ctx, true)
		if e := wantStatus(t, err, http.StatusForbidden); !strings.Contains(e.Message, "admin action on all") {
			t.Errorf("gc refused with %q; want it to say what token it takes", e.Message)
		}
	}
}

// gateStore holds a Stat of one object, after it answered, until released: the window
// in which controld has seen an object present and not yet recorded the release.
type gateStore struct {
	store.Store
	sum      string
	statted  chan struct{} // closed when the gated Stat answered
	release  chan struct{} // close to let it return
	listed   chan struct{} // closed when a List finished
	statOnce sync.Once
	listOnce sync.Once
	freeOnce sync.Once
}

// newGate returns a gateStore factory, and the gate once the fixture has made it. The
// gate opens at the end of the test at the latest, so a failing test does not hang.
func newGate(t *testing.T) (func(store.Store) store.Store, func() *gateStore) {
	var g *gateStore
	wrap := func(s store.Store) store.Store {
		g = &gateStore{Store: s, statted: make(chan struct{}), release: make(chan struct{}), listed: make(chan struct{})}
		return g
	}
	return wrap, func() *gateStore {
		t.Cleanup(g.free)
		return g
	}
}

// free lets the gated Stat return.
func (g *gateStore) free() { g.freeOnce.Do(func() { close(g.release) }) }

func (g *gateStore) Stat(ctx context.Context, sum string) (store.Info, error) {
	info, err := g.Store.Stat(ctx, sum)
	if sum == g.sum {
		g.statOnce.Do(func() { close(g.statted) })
		<-g.release
	}
	return info, err
}

func (g *gateStore) List(ctx context.Context, fn func(store.Listed) error) error {
	err := g.Store.List(ctx, fn)
	g.listOnce.Do(func() { close(g.listed) })
	return err
}

// A push relies on an object already in the store that no recorded release references
// (it does not upload it again). The collector must not delete it between controld
// checking it and recording the release.
func TestGCDoesNotDeleteWhatIsBeingRecorded(t *testing.T) {
	wrap, gated := newGate(t)
	f := newFixtureWith(t, gcConfig, wrap)
	gate := gated()
	ctx := context.Background()
	f.repo("demo")
	v1 := f.push("demo", "1.0", true)
	tr := newTree(t, "demo", v1.id, "2.0", f.key)
	sum := tr.publish(t, f.store) // uploaded long ago: every object is past the grace period
	gate.sum = tr.m.Packages[0].SHA256
	f.clock.Add(48 * time.Hour)

	recorded := make(chan error, 1)
	go func() {
		_, err := f.admin.RecordRelease(ctx, "demo", sum, true, v1.id)
		recorded <- err
	}()
	<-gate.statted
	collected := make(chan error, 1)
	go func() {
		_, err := f.admin.GC(ctx, false)
		collected <- err
	}()
	<-gate.listed // the collector has seen the object as garbage
	time.Sleep(50 * time.Millisecond)
	gate.free()
	if err := <-recorded; err != nil {
		t.Fatalf("record = %v", err)
	}
	if err := <-collected; err != nil {
		t.Fatalf("gc = %v", err)
	}
	if ok, _ := f.store.Has(ctx, gate.sum); !ok {
		t.Fatalf("gc deleted %s, an object of the release recorded while it ran", gate.sum[:12])
	}
	f.holds(pushed{objects: objectsOf(tr)})
}

func objectsOf(tr *tree) map[string]int64 {
	out := map[string]int64{}
	for _, o := range tr.m.Objects() {
		out[o.SHA256] = o.Size
	}
	return out
}

func TestGCBusy(t *testing.T) {
	wrap, gated := newGate(t)
	f := newFixtureWith(t, gcConfig, wrap)
	gate := gated()
	ctx := context.Background()
	f.repo("demo")
	v1 := f.push("demo", "1.0", true)
	tr := newTree(t, "demo", v1.id, "orphan", f.key)
	sum := tr.publish(t, f.store)
	gate.sum = tr.m.Packages[0].SHA256
	f.clock.Add(48 * time.Hour)
	// A recording held at its object check keeps the collector waiting to delete.
	go f.admin.RecordRelease(ctx, "demo", sum, false, "")
	<-gate.statted
	first := make(chan error, 1)
	go func() {
		_, err := f.admin.GC(ctx, false)
		first <- err
	}()
	<-gate.listed
	_, err := f.admin.GC(ctx, true)
	if e := wantStatus(t, err, http.StatusConflict); e.Code != api.CodeBusy {
		t.Errorf("second gc: %v, want code %s", e, api.CodeBusy)
	}
	gate.free()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
}

// With gc_interval, controld collects on its own.
func TestGCSchedule(t *testing.T) {
	f := newFixture(t)
	orphan := put(t, f.store, []byte("nobody's"))
	cfg := gcConfig
	cfg.GCInterval = duration.Duration(20 * time.Millisecond)
	cfg.GCGrace = duration.Duration(time.Nanosecond)
	clock := func() time.Time { return time.Now().Add(time.Hour) }
	cfg.Now = clock
	srv, err := controld.NewServer(cfg, f.store, f.st)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	defer func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Error(err)
		}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if ok, _ := f.store.Has(context.Background(), orphan); !ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the scheduled collection never removed an orphan object")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A release whose manifest cannot be read stops the collection before it deletes an
// object: what the release needs is unknown.
func TestGCStopsOnUnreadableManifest(t *testing.T) {
	f := newFixtureWith(t, gcConfig, nil)
	ctx := context.Background()
	f.repo("demo")
	v1 := f.push("demo", "1.0", true)
	orphan := put(t, f.store, []byte("nobody's"))
	f.clock.Add(48 * time.Hour)
	rel, err := f.admin.Release(ctx, "demo", v1.id)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.store.Delete(ctx, rel.Manifest); err != nil {
		t.Fatal(err)
	}
	before := f.store.Len()
	_, err = f.admin.GC(ctx, false)
	e := wantStatus(t, err, http.StatusUnprocessableEntity)
	if !strings.Contains(e.Message, "garbage collection stopped") || !strings.Contains(e.Message, v1.id) {
		t.Errorf("gc with a manifest missing: %q; want it to say it stopped, naming the release", e.Message)
	}
	if f.store.Len() != before {
		t.Errorf("gc deleted %d objects though it could not read a manifest", before-f.store.Len())
	}
	if ok, _ := f.store.Has(ctx, orphan); !ok {
		t.Errorf("gc deleted an orphan though it could not read a manifest")
	}
}

// The body is decoded strictly: a misspelt field is refused by name, not taken for a
// real collection.
func TestGCBody(t *testing.T) {
	f := newFixture(t)
	orphan := put(t, f.store, []byte("nobody's"))
	f.clock.Add(48 * time.Hour)
	for _, body := range []string{`{"dryrun": true}`, ``, `{"dry_run": "yes"}`} {
		status, out := f.rawRequest("POST", "/v1/gc", f.secret, []byte(body))
		if status != http.StatusBadRequest {
			t.Errorf("POST /v1/gc %s: %d %s, want 400", body, status, out)
		}
	}
	if status, out := f.rawRequest("POST", "/v1/gc", f.secret, []byte(`{"dryrun": true}`)); !strings.Contains(out, "dryrun") {
		t.Errorf("unknown field: %d %s; want it named", status, out)
	}
	if ok, _ := f.store.Has(context.Background(), orphan); !ok {
		t.Errorf("a refused request collected garbage")
	}
}
