package controld_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/armor-apt/armor/controld/api"
	"github.com/armor-apt/armor/controld/client"
)

// wantRolledBack checks that err is a 409 rolled_back naming release as rolled back by
// by, and that the state did not change.
func (f *fixture) wantRolledBack(t *testing.T, err error, before, release, by string) {
	t.Helper()
	apiErr := wantStatus(t, err, http.StatusConflict)
	if apiErr.Code != api.CodeRolledBack || !errors.Is(err, client.ErrRolledBack) || !errors.Is(err, client.ErrConflict) {
		t.Fatalf("error %v: code %q, want %q matching ErrRolledBack and ErrConflict", err, apiErr.Code, api.CodeRolledBack)
	}
	rb := apiErr.RolledBack
	if rb == nil || rb.Release != release || rb.By != by || rb.At.IsZero() || apiErr.HasActive {
		t.Fatalf("rolled_back = %+v (active set: %v), want release %.12s by %s", rb, apiErr.HasActive, release, by)
	}
	if after := f.snapshot(); after != before {
		t.Errorf("a refused activation changed the state:\n%s\nthen:\n%s", before, after)
	}
}

// TestRolledBackRefused: after a rollback, recording and activating the rolled-back
// release again (its parent is active, so the compare-and-swap would pass), or a release
// built on it, or activating it by hand, or rolling back once more onto it, is 409
// rolled_back naming it, who rolled it back and when; the release shows the mark; with
// force it is activated and the mark is gone.
func TestRolledBackRefused(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.repo("demo")
	id1, sum1 := f.release("demo", "", "1.0")
	id2, sum2 := f.release("demo", id1, "2.0")
	id3, sum3 := f.release("demo", id2, "3.0")
	for _, rec := range []struct{ sum, expect string }{{sum1, ""}, {sum2, id1}} {
		if _, err := f.admin.RecordRelease(ctx, "demo", rec.sum, true, rec.expect); err != nil {
			t.Fatal(err)
		}
	}
	ops := f.token("ops", []string{"demo"}, "activate")
	f.clock.Add(time.Hour)
	rolledAt := f.clock.Now()
	if _, err := ops.Rollback(ctx, "demo", id2); err != nil {
		t.Fatal(err)
	}
	rel, err := f.admin.Release(ctx, "demo", id2)
	if err != nil {
		t.Fatal(err)
	}
	if rb := rel.RolledBack; rb == nil || rb.ReplacedBy != id1 || rb.By != "ops" || !rb.At.Equal(rolledAt) {
		t.Fatalf("release %s after the rollback: rolled_back %+v, want replaced by %s, by ops at %v", id2[:12], rb, id1[:12], rolledAt)
	}
	if st, err := f.admin.Status(ctx, "demo"); err != nil || st.Previous != id2 || st.PreviousRolledBack == nil || st.PreviousRolledBack.Release != id2 {
		t.Errorf("status after the rollback: %+v, %v; want previous %s marked rolled back", st, err, id2[:12])
	}
	rels, err := f.admin.Releases(ctx, "demo")
	if err != nil || len(rels) != 2 || rels[0].RolledBack != nil || rels[1].RolledBack == nil {
		t.Fatalf("releases: %+v, %v; want only the second marked", rels, err)
	}

	f.clock.Add(time.Minute)
	before := f.snapshot()
	_, err = f.admin.RecordRelease(ctx, "demo", sum2, true, id1)
	f.wantRolledBack(t, err, before, id2, "ops")
	_, err = f.admin.RecordRelease(ctx, "demo", sum3, true, id2)
	f.wantRolledBack(t, err, before, id2, "ops")
	if !strings.Contains(err.Error(), "release "+id3+" is built on release "+id2+", which was rolled back") {
		t.Errorf("message: %v", err)
	}
	_, err = f.admin.Activate(ctx, "demo", id2, id1)
	f.wantRolledBack(t, err, before, id2, "ops")
	_, err = f.admin.Rollback(ctx, "demo", id1)
	f.wantRolledBack(t, err, before, id2, "ops")
	// force is only meaningful with activate.
	_, err = f.admin.Record(ctx, "demo", api.RecordRequest{Manifest: sum2, Force: true})
	wantStatus(t, err, http.StatusBadRequest)

	rr, err := f.admin.Record(ctx, "demo", api.RecordRequest{Manifest: sum2, Activate: true, ExpectActive: id1, Force: true})
	if err != nil || rr.Activation == nil || rr.Activation.To != id2 {
		t.Fatalf("forced record+activate: %+v, %v", rr, err)
	}
	if rel, err := f.admin.Release(ctx, "demo", id2); err != nil || rel.RolledBack != nil {
		t.Errorf("after the forced activation: %+v, %v; want no mark", rel, err)
	}
	if _, err := f.admin.RecordRelease(ctx, "demo", sum3, true, id2); err != nil {
		t.Errorf("a release built on the re-activated one: %v", err)
	}
}

// TestRolledBackRepublished: a recorded release marked "rollback" deactivates the active
// one as a rollback; the active release is marked rolled back, and activating it again
// by hand needs force.
func TestRolledBackRepublished(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.repo("demo")
	id1, sum1 := f.release("demo", "", "1.0")
	id2, sum2 := f.release("demo", id1, "2.0")
	id3, sum3 := f.release("demo", id2, "1.0") // 1.0 re-published on 2.0
	for _, rec := range []struct{ sum, expect string }{{sum1, ""}, {sum2, id1}} {
		if _, err := f.admin.RecordRelease(ctx, "demo", rec.sum, true, rec.expect); err != nil {
			t.Fatal(err)
		}
	}
	rr, err := f.admin.Record(ctx, "demo", api.RecordRequest{Manifest: sum3, Activate: true, ExpectActive: id2, Rollback: true})
	if err != nil || rr.Activation == nil || !rr.Activation.Rollback || rr.Activation.To != id3 {
		t.Fatalf("record of a rollback release: %+v, %v", rr, err)
	}
	before := f.snapshot()
	_, err = f.admin.Activate(ctx, "demo", id2, id3)
	f.wantRolledBack(t, err, before, id2, "root")
	a, err := f.admin.ActivateWith(ctx, "demo", api.ActivateRequest{Release: id2, ExpectActive: id3, Force: true})
	if err != nil || a.To != id2 {
		t.Fatalf("forced activation: %+v, %v", a, err)
	}
}
