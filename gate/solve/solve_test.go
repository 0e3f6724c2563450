package solve

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// table is a Problem given as lists.
type table struct {
	deps  [][][]int32
	confl [][]int32
}

func (t *table) Depends(v int32) [][]int32 { return t.deps[v] }
func (t *table) Conflicts(v int32) []int32 { return t.confl[v] }

// randomTable makes a problem of n variables from the fuzzer's seed.
func randomTable(r *rand.Rand, n int) *table {
	t := &table{deps: make([][][]int32, n), confl: make([][]int32, n)}
	for v := range n {
		for range r.IntN(3) {
			var alts []int32
			for range r.IntN(4) {
				alts = append(alts, int32(r.IntN(n)))
			}
			t.deps[v] = append(t.deps[v], alts)
		}
	}
	for range r.IntN(n * 2) {
		a, b := int32(r.IntN(n)), int32(r.IntN(n))
		if a != b && !slices.Contains(t.confl[a], b) {
			t.confl[a] = append(t.confl[a], b)
			t.confl[b] = append(t.confl[b], a)
		}
	}
	return t
}

// valid reports whether the set of variables is an installation meeting required.
func (t *table) valid(set []bool, required [][]int32) bool {
	for v, in := range set {
		if !in {
			continue
		}
		for _, alts := range t.deps[v] {
			if !slices.ContainsFunc(alts, func(a int32) bool { return set[a] }) {
				return false
			}
		}
		for _, u := range t.confl[v] {
			if set[u] {
				return false
			}
		}
	}
	for _, g := range required {
		if !slices.ContainsFunc(g, func(a int32) bool { return set[a] }) {
			return false
		}
	}
	return true
}

// exhaustive decides installability by trying every set.
func (t *table) exhaustive(root int32, required [][]int32) bool {
	n := len(t.deps)
	set := make([]bool, n)
	for m := 0; m < 1<<n; m++ {
		if m&(1<<root) == 0 {
			continue
		}
		for v := range n {
			set[v] = m&(1<<v) != 0
		}
		if t.valid(set, required) {
			return true
		}
	}
	return false
}

func checkAll(t *testing.T, seed1, seed2 uint64) {
	r := rand.New(rand.NewPCG(seed1, seed2))
	n := 1 + r.IntN(11)
	tb := randomTable(r, n)
	var required [][]int32
	for range r.IntN(3) {
		g := []int32{int32(r.IntN(n))}
		if r.IntN(2) == 0 {
			g = append(g, int32(r.IntN(n)))
		}
		required = append(required, g)
	}
	s := New(tb, n)
	for root := range int32(n) {
		want := tb.exhaustive(root, required)
		model, got, err := s.Solve(context.Background(), root, required)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Fatalf("seed %d,%d: root %d: solver says %v, exhaustive search %v\n%+v required %v", seed1, seed2, root, got, want, tb, required)
		}
		if got {
			set := make([]bool, n)
			for _, v := range model {
				set[v] = true
			}
			if !set[root] || !tb.valid(set, required) {
				t.Fatalf("seed %d,%d: root %d: model %v is not an installation of it\n%+v", seed1, seed2, root, model, tb)
			}
		}
	}
}

func TestSolveAgainstExhaustive(t *testing.T) {
	for i := range uint64(3000) {
		checkAll(t, i, 42)
	}
}

func FuzzSolve(f *testing.F) {
	f.Add(uint64(1), uint64(2))
	f.Fuzz(func(t *testing.T, a, b uint64) { checkAll(t, a, b) })
}

// pigeons is the pigeonhole problem: p pigeons (the required groups: each sits in one of
// h holes), no two in one hole (conflicts). With more pigeons than holes it has no
// solution, and a CDCL solver needs time exponential in h to show it. Variable p*h is
// the root, with no clauses of its own.
func pigeons(p, h int) (*table, [][]int32) {
	n := p*h + 1
	t := &table{deps: make([][][]int32, n), confl: make([][]int32, n)}
	var required [][]int32
	for i := range p {
		var g []int32
		for j := range h {
			g = append(g, int32(i*h+j))
			for k := range p {
				if k != i {
					t.confl[i*h+j] = append(t.confl[i*h+j], int32(k*h+j))
				}
			}
		}
		required = append(required, g)
	}
	return t, required
}

func TestPigeonsUnsolvable(t *testing.T) {
	tb, required := pigeons(5, 4)
	if _, ok, err := New(tb, len(tb.deps)).Solve(context.Background(), int32(len(tb.deps)-1), required); ok || err != nil {
		t.Fatalf("5 pigeons in 4 holes: ok %v, err %v", ok, err)
	}
}

// TestSolveStopsWhenCancelled: a search that would run for a very long time (12 pigeons
// in 11 holes) stops with the context's error soon after the context is cancelled, as a
// build that is sent SIGTERM must.
func TestSolveStopsWhenCancelled(t *testing.T) {
	tb, required := pigeons(12, 11)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	s := New(tb, len(tb.deps))
	go func() {
		_, ok, err := s.Solve(ctx, int32(len(tb.deps)-1), required)
		if err == nil {
			err = fmt.Errorf("the search ended without the context's error (ok %v)", ok)
		}
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the search went on 20 s after its context was cancelled")
	}
	if s.Stats.Conflicts == 0 {
		t.Fatal("the search had not started when the context was cancelled")
	}
}
