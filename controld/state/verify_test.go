package state_test

import (
	"context"
	"strings"
	"testing"

	"github.com/armor-apt/armor/controld/state"
)

// fake serves fixed data through the read methods Verify uses.
type fake struct {
	state.Store
	repos []state.Repository
	rels  []state.Release
	hist  []state.Activation
	gone  []state.Deleted
}

func (f fake) Repositories(context.Context) ([]state.Repository, error) { return f.repos, nil }
func (f fake) Releases(context.Context, string) ([]state.Release, error) {
	return f.rels, nil
}
func (f fake) History(context.Context, string) ([]state.Activation, error) { return f.hist, nil }
func (f fake) DeletedReleases(context.Context, string) ([]state.Deleted, error) {
	return f.gone, nil
}

func TestVerify(t *testing.T) {
	rel := func(id, parent string, seq uint64) state.Release {
		return state.Release{Repository: "a", ID: id, Manifest: "m" + id, Parent: parent, Seq: seq}
	}
	rels := []state.Release{rel("r1", "", 1), rel("r2", "r1", 2)}
	good := fake{
		repos: []state.Repository{{Name: "a", Hostnames: []string{"a.test"}, Active: &state.Pointer{Release: "r2", Manifest: "mr2"},
			Retired: []state.Retired{{Release: "r1"}}}},
		rels: rels,
		hist: []state.Activation{{Seq: 1, To: "r1"}, {Seq: 2, From: "r1", To: "r2"}},
	}
	if err := state.Verify(context.Background(), good); err != nil {
		t.Fatalf("consistent state: %v", err)
	}
	// A deleted release may still be a parent and in the history.
	pruned := fake{repos: []state.Repository{{Name: "a", Active: good.repos[0].Active}},
		rels: rels[1:], hist: good.hist, gone: []state.Deleted{{Release: rels[0]}}}
	if err := state.Verify(context.Background(), pruned); err != nil {
		t.Fatalf("state with a deleted release: %v", err)
	}
	tests := []struct {
		name   string
		modify func(f *fake)
		want   string
	}{
		{"pointer ahead of history", func(f *fake) { f.hist = f.hist[:1] }, "history ends at"},
		{"broken chain", func(f *fake) { f.hist[1].From = "r2" }, "starts at"},
		{"gap in sequence", func(f *fake) { f.hist[1].Seq = 3 }, "sequence number 3"},
		{"unrecorded target", func(f *fake) { f.rels = f.rels[:1]; f.repos[0].Retired = nil }, "unrecorded release r2"},
		{"unrecorded parent", func(f *fake) { f.rels[1].Parent = "r0" }, "unrecorded parent"},
		{"deleted active", func(f *fake) {
			f.gone = []state.Deleted{{Release: f.rels[1]}}
			f.rels = f.rels[:1]
		}, "active release r2 is not recorded"},
		{"incomplete release", func(f *fake) { f.rels[0].Manifest = "" }, "incomplete"},
		{"wrong active manifest", func(f *fake) { f.repos[0].Active.Manifest = "x" }, "not recorded with manifest"},
		{"active retired", func(f *fake) { f.repos[0].Retired[0].Release = "r2" }, "retired release r2"},
		{"hostname twice", func(f *fake) {
			f.repos = append(f.repos, state.Repository{Name: "b", Hostnames: []string{"a.test"}, Active: f.repos[0].Active})
		}, "claimed by a and b"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := fake{
				repos: []state.Repository{good.repos[0]},
				rels:  append([]state.Release(nil), good.rels...),
				hist:  append([]state.Activation(nil), good.hist...),
			}
			active := *good.repos[0].Active
			f.repos[0].Active = &active
			f.repos[0].Retired = append([]state.Retired(nil), good.repos[0].Retired...)
			tc.modify(&f)
			err := state.Verify(context.Background(), f)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Verify = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
