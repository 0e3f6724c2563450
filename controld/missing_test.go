package controld_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/armor-apt/armor/controld/api"
)

// TestKnownMissing: an object of the active release deleted from the store is taken as
// present by a recording until a report (which controld confirms itself) puts it in the
// known-missing set; then a release using it is refused, naming it, until it is in the
// store again, and the recording that finds it present takes it out of the set.
func TestKnownMissing(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.repo("demo")
	one := newTree(t, "demo", "", "1.0", f.key)
	sum1 := one.publish(t, f.store)
	if _, err := f.admin.RecordRelease(ctx, "demo", sum1, true, ""); err != nil {
		t.Fatal(err)
	}
	oldDeb := one.m.Packages[0]
	packages := "dists/stable/main/binary-amd64/Packages"
	// next publishes a release on 1.0 that still lists 1.0 beside the new version, all
	// but 1.0's .deb, which the store has lost.
	next := func(version string) (*tree, string) {
		tr := newTree(t, "demo", one.m.ID, version, f.key)
		tr.add(oldDeb.Name, oldDeb.Version, one.files[oldDeb.Path])
		tr.index(t)
		sum := tr.publish(t, f.store)
		if err := f.store.Delete(ctx, oldDeb.SHA256); err != nil {
			t.Fatal(err)
		}
		return tr, sum
	}

	// Before any report the active release's objects are trusted: a draft records.
	draftTree, draft := next("1.5")
	if out, err := f.admin.RecordRelease(ctx, "demo", draft, false, ""); err != nil || !out.Created {
		t.Fatalf("a draft before the report: %+v, %v (want it recorded: nothing told controld the object is gone)", out, err)
	}

	// A report: the gone object, an object present (1.0's Packages), and one no store has.
	bogus := strings.Repeat("0", 64)
	pkgs := ""
	for _, x := range one.m.Files {
		if x.Path == packages {
			pkgs = x.SHA256
		}
	}
	rep, err := f.admin.ReportMissing(ctx, "demo", []api.ObjectRef{
		{SHA256: oldDeb.SHA256, Size: oldDeb.Size}, {SHA256: pkgs, Size: -1}, {SHA256: bogus, Size: 3},
	})
	if err != nil {
		t.Fatal(err)
	}
	confirmed := func(set []api.MissingObject) []string {
		var out []string
		for _, x := range set {
			out = append(out, x.SHA256+" "+x.Problem+" "+x.FoundBy)
		}
		return out
	}
	wantSet := []string{bogus + " missing root", oldDeb.SHA256 + " missing root"}
	if got := confirmed(rep.Confirmed); !slices.Equal(got, wantSet) || !slices.Equal(rep.Present, []string{pkgs}) || !slices.Equal(confirmed(rep.Missing), wantSet) {
		t.Fatalf("report answered confirmed %q, present %q, missing %q; want confirmed and missing %q, present %q",
			got, rep.Present, confirmed(rep.Missing), wantSet, []string{pkgs})
	}
	if set, err := f.admin.Missing(ctx, "demo"); err != nil || !slices.Equal(confirmed(set), wantSet) {
		t.Fatalf("GET missing: %q, %v; want %q", confirmed(set), err, wantSet)
	}

	// Now a release using the gone object is refused, naming it, and nothing changes:
	// the draft recorded before the report is not activated either.
	before := f.snapshot()
	_, err = f.admin.Activate(ctx, "demo", draftTree.m.ID, one.m.ID)
	if e := wantStatus(t, err, http.StatusUnprocessableEntity); !slices.Equal(e.Missing, []string{oldDeb.SHA256}) {
		t.Errorf("activating the draft: missing %q, want %s", e.Missing, oldDeb.SHA256)
	}
	_, err = f.admin.RecordRelease(ctx, "demo", draft, true, one.m.ID)
	if e := wantStatus(t, err, http.StatusUnprocessableEntity); !slices.Equal(e.Missing, []string{oldDeb.SHA256}) {
		t.Errorf("recording the draft again with activate: missing %q, want %s", e.Missing, oldDeb.SHA256)
	}
	_, sum2 := next("2.0")
	_, err = f.admin.RecordRelease(ctx, "demo", sum2, true, one.m.ID)
	e := wantStatus(t, err, http.StatusUnprocessableEntity)
	if e.Code != api.CodeInvalidRelease || !slices.Equal(e.Missing, []string{oldDeb.SHA256}) ||
		!strings.Contains(e.Message, oldDeb.SHA256+" ("+oldDeb.Path+": missing)") || !strings.Contains(e.Message, "armor push --repair") {
		t.Fatalf("refusal: code %s, missing %q, message %q; want invalid_release naming %s (%s) and armor push --repair",
			e.Code, e.Missing, e.Message, oldDeb.SHA256, oldDeb.Path)
	}
	if after := f.snapshot(); after != before {
		t.Errorf("a refused release changed the state:\n%s\nwas\n%s", after, before)
	}

	// Once the object is back, the same push records; the object leaves the set, the
	// object no release uses stays.
	put(t, f.store, one.files[oldDeb.Path])
	if out, err := f.admin.RecordRelease(ctx, "demo", sum2, true, one.m.ID); err != nil || out.Activation == nil {
		t.Fatalf("with the object back: %+v, %v", out, err)
	}
	if set, err := f.admin.Missing(ctx, "demo"); err != nil || !slices.Equal(confirmed(set), wantSet[:1]) {
		t.Fatalf("GET missing after the push: %q, %v; want %q", confirmed(set), err, wantSet[:1])
	}

	// Reports need push on the repository, and well-formed digests.
	reader := f.token("reader", []string{"demo"}, "read")
	_, err = reader.ReportMissing(ctx, "demo", []api.ObjectRef{{SHA256: bogus, Size: 1}})
	wantStatus(t, err, http.StatusForbidden)
	_, err = f.admin.ReportMissing(ctx, "demo", []api.ObjectRef{{SHA256: "abc", Size: 1}})
	if e := wantStatus(t, err, http.StatusBadRequest); !strings.Contains(e.Message, `objects[0].sha256 "abc"`) {
		t.Errorf("bad digest: %q, want it named", e.Message)
	}
	_, err = f.admin.ReportMissing(ctx, "nope", nil)
	wantStatus(t, err, http.StatusNotFound)
}
