package statetest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/armor-apt/armor/controld/state"
)

// deliveriesOf returns, oldest first, "hook:type:repository" of every delivery.
func deliveriesOf(t *testing.T, st state.Store) []string {
	t.Helper()
	ds := must(st.Deliveries(context.Background(), state.DeliveryQuery{Limit: 1000}))(t)
	var out []string
	for i := len(ds) - 1; i >= 0; i-- {
		d := ds[i]
		out = append(out, fmt.Sprintf("%s:%s:%s", d.Hook, d.Event.Type, d.Event.Repository))
	}
	return out
}

func hook(id string, repos []string, events ...string) state.Hook {
	slices.Sort(events)
	return state.Hook{ID: id, URL: "https://hooks.test/" + id, Events: events, Repositories: repos, Secret: "s-" + id, CreatedAt: t0, CreatedBy: "admin"}
}

// testHookEvents: the changes that commit get one delivery per hook that wants them,
// in the same transaction; those that fail or change nothing get none. Events are
// numbered in commit order across repositories.
func testHookEvents(t *testing.T, st state.Store) {
	ctx := context.Background()
	newRepo(t, st, "a")
	newRepo(t, st, "b")
	for _, h := range []state.Hook{
		hook("ha", []string{"a"}, state.EventRecord, state.EventActivate),
		hook("hall", []string{"*"}, state.EventRollback, state.EventGC, state.EventKey),
		hook("hb", []string{"b"}, state.EventActivate, state.EventGC),
	} {
		if err := st.CreateHook(ctx, h); err != nil {
			t.Fatal(err)
		}
	}
	mustErr(t, st.CreateHook(ctx, hook("ha", []string{"b"}, state.EventRecord)), state.ErrExists)
	hooks := must(st.Hooks(ctx))(t)
	if len(hooks) != 3 || hooks[0].ID != "ha" || hooks[0].Secret != "s-ha" || !slices.Equal(hooks[1].Repositories, []string{"*"}) {
		t.Fatalf("hooks = %+v", hooks)
	}

	one, two := release("a", "one", ""), release("a", "two", ID("one"))
	one.PushedAt, one.PushedBy = t0, "ci"
	must(st.RecordRelease(ctx, one, nil))(t)
	must(st.RecordRelease(ctx, one, nil))(t) // recorded before: no event
	must(st.RecordRelease(ctx, two, &state.Flip{At: t0, By: "ci"}))(t)
	_, err := st.Activate(ctx, state.Flip{Repository: "a", To: ID("one"), Expect: ID("one"), At: t0})
	mustErr(t, err, state.ErrConflict)
	must(st.Activate(ctx, state.Flip{Repository: "a", To: ID("two"), Expect: ID("two"), At: t0}))(t) // no change
	must(st.Activate(ctx, state.Flip{Repository: "a", To: ID("one"), Expect: ID("two"), At: t0, By: "ops", Rollback: true}))(t)
	b1 := release("b", "b1", "")
	must(st.RecordRelease(ctx, b1, &state.Flip{At: t0}))(t)
	must(st.AddKey(ctx, "b", state.Key{Fingerprint: "AAAA", UserIDs: []string{"b <b@b.test>"}, AddedAt: t0, AddedBy: "admin"}))(t)
	must(st.RemoveKey(ctx, "b", "aaaa", "ops", t0))(t)
	_, err = st.RemoveKey(ctx, "b", "aaaa", "ops", t0)
	mustErr(t, err, state.ErrNotFound)
	gc, n := must2(st.AppendEvent(ctx, state.Event{Type: state.EventGC, At: t0, By: "gc", GC: &state.GCSummary{Objects: 3}}, t0))(t)
	if n != 1 {
		t.Errorf("gc event made %d deliveries; want 1: hall's (hb, of one repository, is not told of a gc)", n)
	}
	_, n = must2(st.AppendEvent(ctx, state.Event{Type: state.EventPing, Hook: "hb", At: t0}, t0))(t)
	if n != 1 {
		t.Errorf("ping made %d deliveries; want 1", n)
	}

	got := deliveriesOf(t, st)
	// two is recorded and activated at once; b1 too, and hb wants activations of b.
	want := []string{"ha:record:a", "ha:record:a", "ha:activate:a", "hall:rollback:a", "hb:activate:b", "hall:key:b", "hall:key:b", "hall:gc:", "hb:ping:"}
	if !slices.Equal(got, want) {
		t.Fatalf("deliveries:\n got  %q\n want %q", got, want)
	}
	ds := must(st.Deliveries(ctx, state.DeliveryQuery{Limit: 1000}))(t)
	slices.Reverse(ds)
	var last uint64
	for _, d := range ds {
		if d.Event.Seq <= last && d.Event.Type != state.EventKey {
			t.Errorf("event %d (%s) after event %d", d.Event.Seq, d.Event.Type, last)
		}
		last = d.Event.Seq
		if d.State != state.DeliveryPending || d.Lease != nil || len(d.Attempts) != 0 {
			t.Errorf("new delivery %+v", d)
		}
	}
	if gc.Seq != ds[len(ds)-2].Event.Seq {
		t.Errorf("AppendEvent returned seq %d; stored %d", gc.Seq, ds[len(ds)-2].Event.Seq)
	}
	act, rb := ds[2].Event, ds[3].Event
	v := must(st.Version(ctx))(t)
	if act.RoutesVersion == 0 || rb.RoutesVersion <= act.RoutesVersion || rb.RoutesVersion > v {
		t.Errorf("routes versions: activate %d, rollback %d, now %d", act.RoutesVersion, rb.RoutesVersion, v)
	}
	if act.Activation == nil || act.Activation.To != ID("two") || act.Release == nil || act.Release.Manifest != ID("mtwo") {
		t.Errorf("activate event %+v", act)
	}
	if rb.Activation == nil || !rb.Activation.Rollback || rb.Activation.From != ID("two") || rb.By != "ops" {
		t.Errorf("rollback event %+v", rb)
	}
	if k := ds[5].Event.Key; k == nil || k.Action != state.KeyAdded || k.Fingerprint != "AAAA" || ds[5].Event.RoutesVersion == 0 {
		t.Errorf("key added event %+v", ds[5].Event)
	}
	if k := ds[6].Event.Key; k == nil || k.Action != state.KeyRemoved || ds[6].Event.By != "ops" || k.UserIDs[0] != "b <b@b.test>" {
		t.Errorf("key removed event %+v", ds[6].Event)
	}
	if r := ds[0].Event.Release; r == nil || r.ID != ID("one") || ds[0].Event.By != "ci" || !ds[0].Event.At.Equal(t0) {
		t.Errorf("record event %+v", ds[0].Event)
	}

	if _, err := st.DeleteHook(ctx, "hall"); err != nil {
		t.Fatal(err)
	}
	_, err = st.DeleteHook(ctx, "hall")
	mustErr(t, err, state.ErrNotFound)
	want = []string{"ha:record:a", "ha:record:a", "ha:activate:a", "hb:activate:b", "hb:ping:"}
	if got := deliveriesOf(t, st); !slices.Equal(got, want) {
		t.Fatalf("deliveries after hall was deleted:\n got  %q\n want %q", got, want)
	}
	if got := must(st.Deliveries(ctx, state.DeliveryQuery{Hook: "hb", Limit: 1}))(t); len(got) != 1 || got[0].Event.Type != state.EventPing {
		t.Fatalf("the newest delivery to hb: %+v", got)
	}
}

func must2[A, B any](a A, b B, err error) func(t *testing.T) (A, B) {
	return func(t *testing.T) (A, B) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return a, b
	}
}

// testHookClaims: a due delivery is leased to one caller; it is claimed again only
// after the lease ends, and only the newest lease may finish it. A failed attempt
// makes it due again at the retry time, or failed for good.
func testHookClaims(t *testing.T, st state.Store) {
	ctx := context.Background()
	newRepo(t, st, "a")
	if err := st.CreateHook(ctx, hook("h", []string{"a"}, state.EventRecord)); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"one", "two"} {
		parent := ""
		if id == "two" {
			parent = ID("one")
		}
		rel := release("a", id, parent)
		rel.PushedAt = t0
		must(st.RecordRelease(ctx, rel, nil))(t)
	}
	now := t0.Add(time.Minute)
	claim := func(by string, at time.Time, limit int) []state.Delivery {
		t.Helper()
		return must(st.ClaimDeliveries(ctx, state.Claim{By: by, Now: at, Lease: 30 * time.Second, Limit: limit}))(t)
	}
	first := claim("r1", now, 1)
	if len(first) != 1 || first[0].Event.Release.ID != ID("one") || first[0].Lease == nil || first[0].Lease.By != "r1" ||
		!first[0].Lease.Until.Equal(now.Add(30*time.Second)) {
		t.Fatalf("first claim: %+v", first)
	}
	second := claim("r2", now, 5)
	if len(second) != 1 || second[0].Event.Release.ID != ID("two") {
		t.Fatalf("second claim: %+v", second)
	}
	if got := claim("r3", now.Add(29*time.Second), 5); len(got) != 0 {
		t.Fatalf("claimed while leased: %+v", got)
	}
	// r1's lease ends unfinished (its process died): r3 claims the delivery again.
	again := claim("r3", now.Add(31*time.Second), 5)
	if len(again) != 2 || again[0].ID != first[0].ID || again[0].Lease.Token == first[0].Lease.Token {
		t.Fatalf("claim after the leases ended: %+v", again)
	}
	ok := state.Attempt{At: now, By: "r1", OK: true, Status: 204}
	_, err := st.FinishDelivery(ctx, first[0].ID, first[0].Lease.Token, ok, time.Time{})
	mustErr(t, err, state.ErrConflict)
	d := must(st.FinishDelivery(ctx, again[0].ID, again[0].Lease.Token, ok, time.Time{}))(t)
	if d.State != state.DeliveryDelivered || len(d.Attempts) != 1 || d.Attempts[0].Status != 204 || d.Lease != nil {
		t.Fatalf("delivered: %+v", d)
	}
	_, err = st.FinishDelivery(ctx, again[0].ID, again[0].Lease.Token, ok, time.Time{})
	mustErr(t, err, state.ErrConflict)
	_, err = st.FinishDelivery(ctx, 1<<40, "x", ok, time.Time{})
	mustErr(t, err, state.ErrNotFound)

	// The other fails, is retried later, and fails for good.
	fail := state.Attempt{At: now, By: "r3", Status: 500, Error: "500 Internal Server Error"}
	retry := now.Add(time.Hour)
	d = must(st.FinishDelivery(ctx, again[1].ID, again[1].Lease.Token, fail, retry))(t)
	if d.State != state.DeliveryPending || !d.NextAt.Equal(retry) || d.Lease != nil {
		t.Fatalf("failed once: %+v", d)
	}
	if got := claim("r1", retry.Add(-time.Second), 5); len(got) != 0 {
		t.Fatalf("claimed before its retry time: %+v", got)
	}
	late := claim("r1", retry, 5)
	if len(late) != 1 || late[0].ID != again[1].ID || len(late[0].Attempts) != 1 {
		t.Fatalf("claim at the retry time: %+v", late)
	}
	d = must(st.FinishDelivery(ctx, late[0].ID, late[0].Lease.Token, fail, time.Time{}))(t)
	if d.State != state.DeliveryFailed || len(d.Attempts) != 2 {
		t.Fatalf("failed for good: %+v", d)
	}
	if got := claim("r1", retry.Add(time.Hour), 5); len(got) != 0 {
		t.Fatalf("claimed a finished delivery: %+v", got)
	}

	// Redelivered on request; then pruned once finished and old.
	d = must(st.Redeliver(ctx, d.ID, retry))(t)
	if d.State != state.DeliveryPending || len(d.Attempts) != 2 {
		t.Fatalf("redelivered: %+v", d)
	}
	_, err = st.Redeliver(ctx, 1<<40, retry)
	mustErr(t, err, state.ErrNotFound)
	if got := must(st.Delivery(ctx, d.ID))(t); got.State != state.DeliveryPending || len(got.Attempts) != 2 || got.Hook != "h" {
		t.Fatalf("Delivery(%d) = %+v", d.ID, got)
	}
	_, err = st.Delivery(ctx, 1<<40)
	mustErr(t, err, state.ErrNotFound)
	if n := must(st.PruneDeliveries(ctx, t0.Add(time.Second)))(t); n != 1 {
		t.Fatalf("pruned %d; want 1 (the delivered one; the other is pending)", n)
	}
	if n := must(st.PruneDeliveries(ctx, t0.Add(time.Second)))(t); n != 0 {
		t.Fatalf("pruned %d again", n)
	}
	if got := must(st.Deliveries(ctx, state.DeliveryQuery{}))(t); len(got) != 1 || got[0].ID != d.ID {
		t.Fatalf("left after pruning: %+v", got)
	}
}

// testConcurrentClaims: many callers claiming at once never lease one delivery twice.
func testConcurrentClaims(t *testing.T, st state.Store) {
	ctx := context.Background()
	newRepo(t, st, "a")
	if err := st.CreateHook(ctx, hook("h", []string{"*"}, state.EventGC)); err != nil {
		t.Fatal(err)
	}
	const events = 40
	for range events {
		must2(st.AppendEvent(ctx, state.Event{Type: state.EventGC, At: t0}, t0))(t)
	}
	var mu sync.Mutex
	seen := map[uint64]string{}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			by := fmt.Sprint("r", w)
			for {
				ds, err := st.ClaimDeliveries(ctx, state.Claim{By: by, Now: t0, Lease: time.Hour, Limit: 3})
				if err != nil {
					t.Error(err)
					return
				}
				if len(ds) == 0 {
					return
				}
				mu.Lock()
				for _, d := range ds {
					if other, dup := seen[d.ID]; dup {
						t.Errorf("delivery %d leased to %s and %s", d.ID, other, by)
					}
					seen[d.ID] = by
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(seen) != events {
		t.Fatalf("%d deliveries claimed; want %d", len(seen), events)
	}
}
