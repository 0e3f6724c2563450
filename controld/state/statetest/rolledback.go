package statetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/armor-apt/armor/controld/state"
)

// wantRolledBack fails t unless err is a *RolledBackError refusing release because
// rolled (itself or an ancestor) was rolled back.
func wantRolledBack(t *testing.T, err error, release, rolled string) {
	t.Helper()
	var rb *state.RolledBackError
	if !errors.As(err, &rb) || !errors.Is(err, state.ErrRolledBack) {
		t.Fatalf("error = %v, want a RolledBackError for %.8s", err, release)
	}
	if rb.Release != release || rb.RolledBack.Release != rolled {
		t.Fatalf("refused %.8s as built on rolled-back %.8s, want %.8s and %.8s", rb.Release, rb.RolledBack.Release, release, rolled)
	}
}

// marked returns repo's rolled-back releases by id.
func marked(t *testing.T, st state.Store, repo string) map[string]state.RolledBack {
	t.Helper()
	out := map[string]state.RolledBack{}
	for _, m := range must(st.RolledBack(context.Background(), repo))(t) {
		out[m.Release] = m
	}
	return out
}

// testRolledBack: a rollback marks the release it deactivates; activating it again, or
// a release built on it, is refused unless forced, also when the compare-and-swap would
// fail; a forced activation clears the marks; a re-published rollback release and its
// descendants are not tainted by the release it replaced; activating an ancestor marks
// the whole chain it skips.
func testRolledBack(t *testing.T, st state.Store) {
	ctx := context.Background()
	newRepo(t, st, "a")
	_, err := st.RolledBack(ctx, "nope")
	mustErr(t, err, state.ErrNotFound)
	one := record(t, st, release("a", "one", ""))
	two := record(t, st, release("a", "two", one.ID))
	activate(t, st, "a", one.ID, "", t0)
	activate(t, st, "a", two.ID, one.ID, t0)
	if m := marked(t, st, "a"); len(m) != 0 {
		t.Fatalf("marks before any rollback: %+v", m)
	}
	at := t0.Add(time.Hour)
	must(st.Activate(ctx, state.Flip{Repository: "a", Expect: two.ID, Rollback: true, By: "ops", At: at}))(t)
	m := marked(t, st, "a")
	if x := m[two.ID]; len(m) != 1 || x.ReplacedBy != one.ID || x.By != "ops" || !x.At.Equal(at) || x.Seq != two.Seq {
		t.Fatalf("marks after the rollback: %+v, want two, replaced by one, by ops at %v", m, at)
	}

	// Two's parent is active again, so the compare-and-swap alone would let it back.
	_, err = st.Activate(ctx, state.Flip{Repository: "a", To: two.ID, Expect: one.ID, By: "ci", At: at})
	wantRolledBack(t, err, two.ID, two.ID)
	_, err = st.RecordRelease(ctx, two, &state.Flip{Expect: one.ID, By: "ci", At: at})
	wantRolledBack(t, err, two.ID, two.ID)
	// Built on two: refused as such, rather than as a lost compare-and-swap on two.
	three := release("a", "three", two.ID)
	_, err = st.RecordRelease(ctx, three, &state.Flip{Expect: two.ID, By: "ci", At: at})
	wantRolledBack(t, err, three.ID, two.ID)
	_, err = st.Release(ctx, "a", three.ID)
	mustErr(t, err, state.ErrNotFound)
	// Recorded as a draft it is fine; activated later, refused.
	record(t, st, three)
	_, err = st.Activate(ctx, state.Flip{Repository: "a", To: three.ID, Expect: one.ID, By: "ci", At: at})
	wantRolledBack(t, err, three.ID, two.ID)
	// A second rollback would bring two back.
	_, err = st.Activate(ctx, state.Flip{Repository: "a", Expect: one.ID, Rollback: true, By: "ops", At: at})
	wantRolledBack(t, err, two.ID, two.ID)
	if r := must(st.Repository(ctx, "a"))(t); r.Active.Release != one.ID {
		t.Fatalf("active after the refusals: %.8s, want one", r.Active.Release)
	}

	// Forced, three (and two under it) is active again and unmarked.
	must(st.Activate(ctx, state.Flip{Repository: "a", To: three.ID, Expect: one.ID, Force: true, By: "ops", At: at}))(t)
	if m := marked(t, st, "a"); len(m) != 0 {
		t.Fatalf("marks after a forced activation: %+v", m)
	}

	// A re-published rollback: four holds two's content, with three as its parent.
	four := release("a", "four", three.ID)
	out := must(st.RecordRelease(ctx, four, &state.Flip{Expect: three.ID, Rollback: true, By: "ops", At: at}))(t)
	if out.Activation == nil || !out.Activation.Rollback || out.Activation.From != three.ID {
		t.Fatalf("re-published rollback: %+v, want a rollback activation from three", out.Activation)
	}
	if m := marked(t, st, "a"); len(m) != 1 || m[three.ID].ReplacedBy != four.ID {
		t.Fatalf("marks after the re-published rollback: %+v, want three replaced by four", m)
	}
	// Releases built on four are not built on three, though four's parent is three.
	five := release("a", "five", four.ID)
	must(st.RecordRelease(ctx, five, &state.Flip{Expect: four.ID, By: "ci", At: at}))(t)
	// Rolled back to four: four is accepted content, five is marked.
	must(st.Activate(ctx, state.Flip{Repository: "a", Expect: five.ID, Rollback: true, By: "ops", At: at}))(t)
	if m := marked(t, st, "a"); len(m) != 2 || m[five.ID].ReplacedBy != four.ID {
		t.Fatalf("marks after rolling five back: %+v", m)
	}

	testActivateAncestor(t, st, at, [5]state.Release{one, two, three, four, five})
}

// testActivateAncestor continues testRolledBack from its chain one ... five (five rolled
// back to four): activating an ancestor marks every release it skips, forcing one back
// unmarks what lies under it, and a forced activation that undoes a re-published rollback
// leaves its release unmarked.
func testActivateAncestor(t *testing.T, st state.Store, at time.Time, chain [5]state.Release) {
	ctx := context.Background()
	one, two, three, four, five := chain[0], chain[1], chain[2], chain[3], chain[4]
	var m map[string]state.RolledBack
	var err error
	// Activating an ancestor (one) rolls back everything between: four and three are
	// marked (three keeps its first mark), and two with them.
	must(st.Activate(ctx, state.Flip{Repository: "a", To: one.ID, Expect: four.ID, By: "ops", At: at.Add(time.Hour)}))(t)
	m = marked(t, st, "a")
	for _, id := range []string{two.ID, three.ID, four.ID, five.ID} {
		if _, ok := m[id]; !ok {
			t.Errorf("%.8s is not marked after activating one over it: %+v", id, m)
		}
	}
	if m[four.ID].ReplacedBy != one.ID || m[three.ID].ReplacedBy != four.ID {
		t.Errorf("marks: %+v, want four replaced by one and three still by four", m)
	}
	_, err = st.Activate(ctx, state.Flip{Repository: "a", To: four.ID, Expect: one.ID, By: "ci", At: at})
	wantRolledBack(t, err, four.ID, four.ID)
	// Forced back to four: four, three and two are unmarked; five (not under four) stays
	// marked.
	must(st.Activate(ctx, state.Flip{Repository: "a", To: four.ID, Expect: one.ID, Force: true, By: "ops", At: at}))(t)
	if m := marked(t, st, "a"); len(m) != 1 || m[five.ID].Release != five.ID {
		t.Errorf("marks after forcing four back: %+v, want five only", m)
	}
	// Four rolled back by a re-published six (its child), then forced back over six:
	// that undoes the rollback, so six is not marked, and rolling back from four reaches
	// six again.
	six := release("a", "six", four.ID)
	must(st.RecordRelease(ctx, six, &state.Flip{Expect: four.ID, Rollback: true, By: "ops", At: at}))(t)
	must(st.Activate(ctx, state.Flip{Repository: "a", To: four.ID, Expect: six.ID, Force: true, By: "ops", At: at}))(t)
	if m := marked(t, st, "a"); len(m) != 1 {
		t.Errorf("marks after undoing the re-published rollback: %+v, want five only", m)
	}
	a := must(st.Activate(ctx, state.Flip{Repository: "a", Expect: four.ID, Rollback: true, By: "ops", At: at}))(t)
	if a.To != six.ID {
		t.Errorf("rollback from four went to %.8s, want six", a.To)
	}
	// A forced activation of an ancestor that undoes no rollback still marks what it
	// skips: one over six marks six (four, rolled back to six, keeps its mark), three and
	// two.
	must(st.Activate(ctx, state.Flip{Repository: "a", To: one.ID, Expect: six.ID, Force: true, By: "ops", At: at}))(t)
	m = marked(t, st, "a")
	if m[six.ID].ReplacedBy != one.ID || m[four.ID].ReplacedBy != six.ID || m[three.ID].ReplacedBy != one.ID || m[two.ID].ReplacedBy != one.ID {
		t.Errorf("marks after forcing one over six: %+v, want six, three and two replaced by one, four by six", m)
	}
}
