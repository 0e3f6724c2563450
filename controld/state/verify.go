package state

import (
	"context"
	"errors"
	"fmt"
)

// Verify checks the logical consistency of a store through its interface: each
// repository's history is one unbroken chain (every entry starts where the previous one
// ended, sequence numbers 1, 2, ...) that ends at the active pointer; every release the
// history names is recorded or deleted (DeleteRelease), the active one recorded; every
// release's parent is recorded or deleted; each hostname belongs to one repository;
// retired releases are recorded and not active; the active release is not marked rolled
// back. It returns all problems found, joined.
func Verify(ctx context.Context, st Store) error {
	repos, err := st.Repositories(ctx)
	if err != nil {
		return fmt.Errorf("verify state: %w", err)
	}
	var problems []error
	owner := map[string]string{}
	for _, r := range repos {
		for _, h := range r.Hostnames {
			if o, dup := owner[h]; dup {
				problems = append(problems, fmt.Errorf("hostname %s is claimed by %s and %s", h, o, r.Name))
			}
			owner[h] = r.Name
		}
		if err := verifyRepository(ctx, st, r); err != nil {
			problems = append(problems, err)
		}
	}
	return errors.Join(problems...)
}

func verifyRepository(ctx context.Context, st Store, r Repository) error {
	var problems []error
	bad := func(format string, args ...any) {
		problems = append(problems, fmt.Errorf("repository %s: "+format, append([]any{r.Name}, args...)...))
	}
	rels, err := st.Releases(ctx, r.Name)
	if err != nil {
		return fmt.Errorf("repository %s: list releases: %w", r.Name, err)
	}
	known := make(map[string]Release, len(rels))
	for i, rel := range rels {
		if rel.Repository != r.Name || rel.ID == "" || rel.Manifest == "" {
			bad("release %d (%s) is incomplete: %+v", i+1, rel.ID, rel)
		}
		if i > 0 && rels[i-1].Seq >= rel.Seq {
			bad("releases %s and %s are out of order", rels[i-1].ID, rel.ID)
		}
		known[rel.ID] = rel
	}
	deleted, err := st.DeletedReleases(ctx, r.Name)
	if err != nil {
		return fmt.Errorf("repository %s: list deleted releases: %w", r.Name, err)
	}
	existed := make(map[string]bool, len(rels)+len(deleted))
	for _, d := range deleted {
		existed[d.Release.ID] = true
	}
	for id := range known {
		existed[id] = true
	}
	for _, rel := range rels {
		if rel.Parent != "" {
			if !existed[rel.Parent] {
				bad("release %s has an unrecorded parent %s", rel.ID, rel.Parent)
			}
		}
	}
	hist, err := st.History(ctx, r.Name)
	if err != nil {
		return fmt.Errorf("repository %s: history: %w", r.Name, err)
	}
	prev := ""
	for i, a := range hist {
		if a.Seq != uint64(i+1) {
			bad("history entry %d has sequence number %d", i+1, a.Seq)
		}
		if a.From != prev {
			bad("history entry %d starts at %q, but the previous one ended at %q", a.Seq, a.From, prev)
		}
		if !existed[a.To] {
			bad("history entry %d activates unrecorded release %s", a.Seq, a.To)
		}
		prev = a.To
	}
	active := ""
	if r.Active != nil {
		active = r.Active.Release
		if rel, ok := known[active]; !ok || rel.Manifest != r.Active.Manifest {
			bad("active release %s is not recorded with manifest %s", active, r.Active.Manifest)
		}
	}
	if active != prev {
		bad("active pointer is %q, but the history ends at %q", active, prev)
	}
	for _, x := range r.Retired {
		if _, ok := known[x.Release]; !ok || x.Release == active {
			bad("retired release %s is unrecorded or active", x.Release)
		}
	}
	if err := verifyRolledBack(ctx, st, r.Name, active); err != nil {
		problems = append(problems, err)
	}
	return errors.Join(problems...)
}
