package controld_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/armor-apt/armor/controld/api"
	"github.com/armor-apt/armor/controld/state"
)

// refused checks that err is a 409 with code and a message containing want, and that
// the state did not change.
func (f *fixture) refused(t *testing.T, before string, err error, code, want string) {
	t.Helper()
	apiErr := wantStatus(t, err, http.StatusConflict)
	if apiErr.Code != code || !strings.Contains(apiErr.Message, want) {
		t.Errorf("error %s: %q\nwant %s containing %q", apiErr.Code, apiErr.Message, code, want)
	}
	if after := f.snapshot(); after != before {
		t.Errorf("state changed:\n%s\n→\n%s", before, after)
	}
}

// TestNoSilentDowngrade acts as someone with a push and activate token who wants an
// older release served again: re-posting an older release's manifest with activate and
// the current expect_active, a deleted release, a release of another line, a release
// whose Release is dated before the active one's. Each is refused with 409 and a code
// naming the rule, and nothing changes; each goes through as an explicit rollback or
// with force.
func TestNoSilentDowngrade(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.repo("demo")
	record := func(tr *tree, activate bool, expect string) (*api.RecordResponse, error) {
		return f.admin.Record(ctx, "demo", api.RecordRequest{Manifest: tr.publish(t, f.store), Activate: activate, ExpectActive: expect})
	}
	one := newTree(t, "demo", "", "1.0", f.key)
	if _, err := record(one, true, ""); err != nil {
		t.Fatal(err)
	}
	two := newTree(t, "demo", one.m.ID, "2.0", f.key)
	two.date = "Sun, 22 Nov 2026 09:00:00 UTC"
	two.index(t)
	if _, err := record(two, true, one.m.ID); err != nil {
		t.Fatal(err)
	}

	t.Run("an older release re-posted", func(t *testing.T) {
		before := f.snapshot()
		_, err := record(one, true, two.m.ID)
		f.refused(t, before, err, api.CodeNotOnActiveLine, "release "+one.m.ID+" is not built on the active release "+two.m.ID)
	})
	t.Run("a release of another line", func(t *testing.T) {
		side := newTree(t, "demo", one.m.ID, "1.5", f.key)
		side.date = "Sun, 22 Nov 2026 10:00:00 UTC" // newer, but not built on 2.0
		side.index(t)
		before := f.snapshot()
		_, err := record(side, true, two.m.ID)
		f.refused(t, before, err, api.CodeNotOnActiveLine, "its parent is "+one.m.ID)
		// Recorded as a draft, /activate refuses it the same way, but for force.
		if _, err := record(side, false, ""); err != nil {
			t.Fatal(err)
		}
		before = f.snapshot()
		_, err = f.admin.Activate(ctx, "demo", side.m.ID, two.m.ID)
		f.refused(t, before, err, api.CodeNotOnActiveLine, "armor activate --force")
	})
	t.Run("a release dated before the active one", func(t *testing.T) {
		old := newTree(t, "demo", two.m.ID, "3.0", f.key)
		old.date = "Sun, 22 Nov 2026 08:30:00 UTC"
		old.index(t)
		before := f.snapshot()
		_, err := record(old, true, two.m.ID)
		f.refused(t, before, err, api.CodeOlderRelease,
			"suite stable of release "+old.m.ID+" is dated Sun, 22 Nov 2026 08:30:00 UTC, older than in the active release "+two.m.ID+" (Sun, 22 Nov 2026 09:00:00 UTC)")
		if _, err := record(old, false, ""); err != nil {
			t.Fatal(err)
		}
		before = f.snapshot()
		_, err = f.admin.Activate(ctx, "demo", old.m.ID, two.m.ID)
		f.refused(t, before, err, api.CodeOlderRelease, "older than in the active release")
	})
	t.Run("a release dated the same second as the active one, with other content", func(t *testing.T) {
		same := newTree(t, "demo", two.m.ID, "3.1", f.key)
		same.date = two.date
		same.index(t)
		before := f.snapshot()
		_, err := record(same, true, two.m.ID)
		f.refused(t, before, err, api.CodeOlderRelease, "is dated Sun, 22 Nov 2026 09:00:00 UTC, the same second as, but other than, the suite in the active release")
	})
	t.Run("a deleted release re-posted", func(t *testing.T) {
		draft := newTree(t, "demo", two.m.ID, "2.5", f.key)
		if _, err := record(draft, false, ""); err != nil {
			t.Fatal(err)
		}
		if _, err := f.admin.DeleteRelease(ctx, "demo", draft.m.ID); err != nil {
			t.Fatal(err)
		}
		before := f.snapshot()
		_, err := record(draft, true, two.m.ID)
		f.refused(t, before, err, api.CodeDeletedRelease, "release "+draft.m.ID+" was deleted at ")
	})
	t.Run("an explicit rollback goes back", func(t *testing.T) {
		rr, err := f.admin.Record(ctx, "demo", api.RecordRequest{Manifest: one.publish(t, f.store), Activate: true, ExpectActive: two.m.ID, Rollback: true})
		if err != nil || rr.Activation == nil || !rr.Activation.Rollback || rr.Activation.To != one.m.ID {
			t.Fatalf("rollback: %+v, %v", rr, err)
		}
		if rel, err := f.admin.Release(ctx, "demo", two.m.ID); err != nil || rel.RolledBack == nil {
			t.Errorf("2.0 after the rollback: %+v, %v; want it marked rolled back", rel, err)
		}
	})
	t.Run("force goes anywhere", func(t *testing.T) {
		if _, err := f.admin.ActivateWith(ctx, "demo", api.ActivateRequest{Release: two.m.ID, ExpectActive: one.m.ID, Force: true}); err != nil {
			t.Fatal(err)
		}
		side := newTree(t, "demo", one.m.ID, "1.6", f.key)
		side.index(t)
		if _, err := f.admin.Record(ctx, "demo", api.RecordRequest{Manifest: side.publish(t, f.store), Activate: true, ExpectActive: two.m.ID, Force: true}); err != nil {
			t.Fatalf("forced: %v", err)
		}
	})
}

// TestActivateAncestorIsARollback: /activate of a release the active one is built on goes
// back, and marks what it skips rolled back, as armor activate documents.
func TestActivateAncestorIsARollback(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.repo("demo")
	id1, sum1 := f.release("demo", "", "1.0")
	if _, err := f.admin.RecordRelease(ctx, "demo", sum1, true, ""); err != nil {
		t.Fatal(err)
	}
	id2, sum2 := f.release("demo", id1, "2.0")
	if _, err := f.admin.RecordRelease(ctx, "demo", sum2, true, id1); err != nil {
		t.Fatal(err)
	}
	if _, err := f.admin.Activate(ctx, "demo", id1, id2); err != nil {
		t.Fatalf("activate the parent: %v", err)
	}
	if rel, err := f.admin.Release(ctx, "demo", id2); err != nil || rel.RolledBack == nil {
		t.Errorf("2.0: %+v, %v; want it marked rolled back", rel, err)
	}
}

// TestDowngradeAgainstALegacyRelease: a release recorded before controld kept its
// suites is compared by the Date of its Release files.
func TestDowngradeAgainstALegacyRelease(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.repo("demo")
	one := newTree(t, "demo", "", "1.0", f.key)
	one.date = "Sun, 22 Nov 2026 09:00:00 UTC"
	one.index(t)
	sum := one.publish(t, f.store)
	legacy := state.Release{Repository: "demo", ID: one.m.ID, Manifest: sum, Date: one.m.Date, Packages: 1, Files: len(one.m.Files)} // no Suites
	if _, err := f.st.RecordRelease(ctx, legacy, &state.Flip{By: "root", At: f.clock.Now()}); err != nil {
		t.Fatal(err)
	}
	old := newTree(t, "demo", one.m.ID, "2.0", f.key)
	old.date = "Sun, 22 Nov 2026 08:00:00 UTC"
	old.index(t)
	before := f.snapshot()
	_, err := f.admin.RecordRelease(ctx, "demo", old.publish(t, f.store), true, one.m.ID)
	f.refused(t, before, err, api.CodeOlderRelease, "older than in the active release "+one.m.ID+" (Sun, 22 Nov 2026 09:00:00 UTC)")
}
