package state_test

import (
	"context"
	"strings"
	"testing"

	"github.com/armor-apt/armor/controld/state"
)

// RolledBack gives Verify no rolled-back release.
func (f fake) RolledBack(context.Context, string) ([]state.RolledBack, error) { return nil, nil }

// markedFake is a fake with rolled-back releases.
type markedFake struct {
	fake
	marks []state.RolledBack
}

func (f markedFake) RolledBack(context.Context, string) ([]state.RolledBack, error) {
	return f.marks, nil
}

// TestVerifyRolledBack: an active release marked rolled back is reported.
func TestVerifyRolledBack(t *testing.T) {
	rels := []state.Release{
		{Repository: "a", ID: "r1", Manifest: "mr1", Seq: 1},
		{Repository: "a", ID: "r2", Manifest: "mr2", Parent: "r1", Seq: 2},
	}
	f := markedFake{fake: fake{
		repos: []state.Repository{{Name: "a", Active: &state.Pointer{Release: "r1", Manifest: "mr1"}}},
		rels:  rels,
		hist:  []state.Activation{{Seq: 1, To: "r2"}, {Seq: 2, From: "r2", To: "r1", Rollback: true}},
	}, marks: []state.RolledBack{{Release: "r2", ReplacedBy: "r1"}}}
	if err := state.Verify(context.Background(), f); err != nil {
		t.Fatalf("a rolled-back release that is not active: %v", err)
	}
	f.marks = append(f.marks, state.RolledBack{Release: "r1"})
	err := state.Verify(context.Background(), f)
	if err == nil || !strings.Contains(err.Error(), "active release r1 is marked rolled back") {
		t.Errorf("Verify = %v, want the active release named as marked", err)
	}
}
