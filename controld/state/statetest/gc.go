package statetest

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/armor-apt/armor/controld/state"
)

// mustKept fails t unless err is a *KeptError giving why.
func mustKept(t *testing.T, err error, why string) {
	t.Helper()
	var kept *state.KeptError
	if !errors.As(err, &kept) || !errors.Is(err, state.ErrKept) || kept.Reason != why {
		t.Fatalf("delete = %v, want a KeptError: %s", err, why)
	}
}

// testDeleteRelease: the protected releases are refused whatever the policy, the policy
// adds its own, and a deleted release is gone from everything but the history.
func testDeleteRelease(t *testing.T, st state.Store) {
	ctx := context.Background()
	newRepo(t, st, "a")
	one := record(t, st, release("a", "one", ""))
	two := record(t, st, release("a", "two", one.ID))
	three := record(t, st, release("a", "three", two.ID))
	draft := record(t, st, release("a", "draft", two.ID))
	activate(t, st, "a", one.ID, "", t0)
	activate(t, st, "a", two.ID, one.ID, t0.Add(time.Hour))
	activate(t, st, "a", three.ID, two.ID, t0.Add(2*time.Hour))
	del := func(id string, at time.Time, p state.KeepPolicy) (state.Release, error) {
		return st.DeleteRelease(ctx, state.Deletion{Repository: "a", ID: id, By: "ops", At: at, Policy: p})
	}

	now := t0.Add(3 * time.Hour) // within the 48h window of one and two
	_, err := del(three.ID, now, state.KeepPolicy{})
	mustKept(t, err, state.KeepActive)
	_, err = del(two.ID, now, state.KeepPolicy{})
	mustKept(t, err, state.KeepPrevious)
	_, err = del(one.ID, now, state.KeepPolicy{})
	mustKept(t, err, state.KeepRetained)
	_, err = del(ID("ghost"), now, state.KeepPolicy{})
	mustErr(t, err, state.ErrNotFound)

	later := t0.Add(50 * time.Hour) // one's window has passed
	_, err = del(one.ID, later, state.KeepPolicy{Last: 3})
	mustKept(t, err, state.KeepRecent)
	_, err = del(draft.ID, later, state.KeepPolicy{Drafts: 72 * time.Hour})
	mustKept(t, err, state.KeepDraft)

	got := must(del(one.ID, later, state.KeepPolicy{Last: 2, Drafts: time.Hour}))(t)
	if !reflect.DeepEqual(got, one) {
		t.Errorf("deleted %+v, want the record %+v", got, one)
	}
	must(del(draft.ID, later, state.KeepPolicy{}))(t)
	_, err = st.Release(ctx, "a", one.ID)
	mustErr(t, err, state.ErrNotFound)
	_, err = del(one.ID, later, state.KeepPolicy{})
	mustErr(t, err, state.ErrNotFound)
	if rels := must(st.Releases(ctx, "a"))(t); len(rels) != 2 || rels[0].ID != two.ID || rels[1].ID != three.ID {
		t.Errorf("releases after deleting one and the draft = %+v, want two, three", rels)
	}
	_, err = st.Activate(ctx, state.Flip{Repository: "a", To: one.ID, Expect: three.ID, By: "ops", At: later})
	mustErr(t, err, state.ErrNotFound)
	r := must(st.Repository(ctx, "a"))(t)
	for _, x := range r.Retired {
		if x.Release == one.ID {
			t.Errorf("deleted release still in the retired list: %+v", r.Retired)
		}
	}
	if hist := must(st.History(ctx, "a"))(t); len(hist) != 3 || hist[0].To != one.ID {
		t.Errorf("history after deletion = %+v, want its three entries", hist)
	}
	gone := must(st.DeletedReleases(ctx, "a"))(t)
	if len(gone) != 2 || !reflect.DeepEqual(gone[0].Release, one) || gone[0].DeletedBy != "ops" || !gone[0].DeletedAt.Equal(later) || !reflect.DeepEqual(gone[1].Release, draft) {
		t.Errorf("deleted releases = %+v, want one then the draft, by ops at %v", gone, later)
	}
	_, err = st.DeletedReleases(ctx, "ghost")
	mustErr(t, err, state.ErrNotFound)
}

// testDeleteWhileActivating: a deletion racing an activation of the same release never
// leaves an active release unrecorded; exactly one of the two wins.
func testDeleteWhileActivating(t *testing.T, st state.Store) {
	ctx := context.Background()
	newRepo(t, st, "a")
	prev := record(t, st, release("a", "base", ""))
	activate(t, st, "a", prev.ID, "", t0)
	for i := range 20 {
		rel := record(t, st, release("a", "r"+string(rune('a'+i)), prev.ID))
		var wg sync.WaitGroup
		var actErr, delErr error
		wg.Add(2)
		go func() {
			defer wg.Done()
			_, actErr = st.Activate(ctx, state.Flip{Repository: "a", To: rel.ID, Expect: prev.ID, By: "ci", At: t0})
		}()
		go func() {
			defer wg.Done()
			_, delErr = st.DeleteRelease(ctx, state.Deletion{Repository: "a", ID: rel.ID, By: "gc", At: t0})
		}()
		wg.Wait()
		switch {
		case actErr == nil && errors.Is(delErr, state.ErrKept):
			prev = rel
		case delErr == nil && errors.Is(actErr, state.ErrNotFound):
		default:
			t.Fatalf("round %d: activate = %v, delete = %v; want exactly one to win", i, actErr, delErr)
		}
	}
}
