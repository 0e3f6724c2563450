package state

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrKept: the release may not be deleted now. The error is a *KeptError saying why.
// Nothing changed.
var ErrKept = errors.New("release is kept")

// KeptError refuses to delete a release, naming the rule that keeps it.
type KeptError struct {
	Repository string
	Release    string
	Reason     string // one of the Keep* reasons
}

func (e *KeptError) Error() string {
	return fmt.Sprintf("release %s of repository %s is kept: %s", e.Release, e.Repository, e.Reason)
}

// Is makes errors.Is(err, ErrKept) true.
func (e *KeptError) Is(target error) bool { return target == ErrKept }

// Reasons a release is kept, as Kept reports them. The first three protect every
// release, whatever the policy: deleting one would break what edges serve or what
// `armor rollback` does.
const (
	KeepActive   = "it is the active release"
	KeepPrevious = "it is the previously active release, which armor rollback would activate"
	KeepRetained = "it was active within the retention window, and edges still serve its by-hash and pool files"
	KeepRecent   = "it is one of the most recently active releases the collector keeps"
	KeepDraft    = "it was recorded recently and never activated"
)

// KeepPolicy says which releases beyond the protected ones (active, retained, rollback
// target) are kept. The zero value keeps only the protected ones: that is the rule of an
// explicit deletion; the garbage collector adds its own.
type KeepPolicy struct {
	// Last keeps the Last releases most recently active (the active one counts).
	Last int
	// Drafts keeps a release that was never activated for this long after it was pushed,
	// so a release recorded for later activation is not collected before it is used.
	Drafts time.Duration
}

// Kept returns the releases of r that policy p keeps at now, each with its reason (the
// strongest one). rels are r's releases and hist its history, oldest first.
func Kept(r Repository, rels []Release, hist []Activation, now time.Time, p KeepPolicy) map[string]string {
	kept := map[string]string{}
	keep := func(id, why string) {
		if _, ok := kept[id]; !ok && id != "" {
			kept[id] = why
		}
	}
	if r.Active != nil {
		keep(r.Active.Release, KeepActive)
	}
	if len(hist) > 0 {
		keep(hist[len(hist)-1].From, KeepPrevious)
	}
	for _, x := range r.Retired {
		if x.DeactivatedAt.Add(r.Retention).After(now) {
			keep(x.Release, KeepRetained)
		}
	}
	seen := map[string]bool{}
	for i := len(hist) - 1; i >= 0 && len(seen) < p.Last; i-- {
		seen[hist[i].To] = true
		keep(hist[i].To, KeepRecent)
	}
	activated := map[string]bool{}
	for _, a := range hist {
		activated[a.To] = true
	}
	for _, rel := range rels {
		if !activated[rel.ID] && rel.PushedAt.Add(p.Drafts).After(now) {
			keep(rel.ID, KeepDraft)
		}
	}
	return kept
}

// Deletion asks to delete the record of one release, unless Policy keeps it at At.
type Deletion struct {
	Repository string
	ID         string
	By         string
	At         time.Time
	Policy     KeepPolicy
}

// Deleted is the record of a deleted release, as it was, with who deleted it and when.
// It keeps the history and the parents of later releases naming a release that existed.
type Deleted struct {
	Release   Release   `json:"release"`
	DeletedAt time.Time `json:"deleted_at"`
	DeletedBy string    `json:"deleted_by"`
}

// Deleter removes release records. It is part of Store.
//
// A deleted release is no longer recorded: Release answers ErrNotFound, Releases omits
// it, a flip to it fails, and its objects may then be collected from the object store.
// The history keeps its entries.
type Deleter interface {
	// DeleteRelease removes the record of d.ID and returns it, in one transaction with
	// the check of d.Policy (Kept): a kept release gives a *KeptError (ErrKept), an
	// unknown one ErrNotFound. The repository's retired list forgets the release.
	DeleteRelease(ctx context.Context, d Deletion) (Release, error)
	// DeletedReleases returns the deleted releases of repo, oldest deletion first (in
	// recording order among those deleted at the same time); ErrNotFound for an unknown
	// repository.
	DeletedReleases(ctx context.Context, repo string) ([]Deleted, error)
}

// IsProtected reports whether why is a reason no policy can lift.
func IsProtected(why string) bool {
	return why == KeepActive || why == KeepRetained || why == KeepPrevious
}
