package statetest

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/armor-apt/armor/controld/state"
)

// testMissing: each repository has its own set of known-missing objects, sorted by
// digest; a report replaces an object's entry; clearing ignores digests not in the set;
// an unknown repository is ErrNotFound.
func testMissing(t *testing.T, st state.Store) {
	ctx := context.Background()
	newRepo(t, st, "a")
	newRepo(t, st, "b")
	obj := func(name, problem string, size int64) state.MissingObject {
		return state.MissingObject{SHA256: ID(name), Size: size, Problem: problem, FoundAt: t0, FoundBy: "ci"}
	}
	x, y, z := obj("x", state.ObjectMissing, 10), obj("y", state.ObjectSize, 20), obj("z", state.ObjectHash, -1)
	assertMissing := func(repo string, want ...state.MissingObject) {
		t.Helper()
		got := must(st.Missing(ctx, repo))(t)
		if !slices.EqualFunc(got, want, func(a, b state.MissingObject) bool {
			return a.SHA256 == b.SHA256 && a.Size == b.Size && a.Problem == b.Problem && a.FoundAt.Equal(b.FoundAt) && a.FoundBy == b.FoundBy
		}) {
			t.Fatalf("missing objects of %s:\n got  %+v\n want %+v", repo, got, want)
		}
	}
	assertMissing("a")
	// Out of order on the way in, sorted on the way out.
	if err := st.MarkMissing(ctx, "a", []state.MissingObject{z, x}); err != nil {
		t.Fatal(err)
	}
	if err := st.MarkMissing(ctx, "b", []state.MissingObject{y}); err != nil {
		t.Fatal(err)
	}
	assertMissing("a", x, z)
	assertMissing("b", y)

	x2 := x
	x2.Problem, x2.FoundAt, x2.FoundBy = state.ObjectSize, t0.Add(time.Hour), "ops"
	if err := st.MarkMissing(ctx, "a", []state.MissingObject{x2, y}); err != nil {
		t.Fatal(err)
	}
	assertMissing("a", x2, y, z)

	if err := st.ClearMissing(ctx, "a", []string{x.SHA256, ID("never reported")}); err != nil {
		t.Fatal(err)
	}
	assertMissing("a", y, z)
	assertMissing("b", y)
	if err := st.ClearMissing(ctx, "b", []string{y.SHA256}); err != nil {
		t.Fatal(err)
	}
	assertMissing("b")
	assertMissing("a", y, z)
	if err := st.ClearMissing(ctx, "a", nil); err != nil {
		t.Fatal(err)
	}
	assertMissing("a", y, z)

	mustErr(t, st.MarkMissing(ctx, "nope", []state.MissingObject{x}), state.ErrNotFound)
	mustErr(t, st.ClearMissing(ctx, "nope", []string{x.SHA256}), state.ErrNotFound)
	_, err := st.Missing(ctx, "nope")
	mustErr(t, err, state.ErrNotFound)
}
