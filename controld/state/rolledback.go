package state

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrRolledBack: the release to activate was rolled back, or is built on one that was,
// and the flip was not forced. The error is a *RolledBackError. Nothing changed.
var ErrRolledBack = errors.New("release was rolled back")

// RolledBack marks a release that a rollback deactivated, so that nothing re-activates
// it by accident: a push of the release again (its parent is active once more), or of a
// release built on it.
type RolledBack struct {
	Release    string    `json:"release"`
	Seq        uint64    `json:"seq"`         // the release's Seq
	ReplacedBy string    `json:"replaced_by"` // the release the rollback activated
	At         time.Time `json:"at"`
	By         string    `json:"by"`
}

// RolledBackError is an activation refused because the release, or a release it is
// built on, was rolled back.
type RolledBackError struct {
	Repository string
	Release    string     // the release whose activation was refused
	RolledBack RolledBack // Release itself, or the ancestor of it that was rolled back
}

func (e *RolledBackError) Error() string {
	rb := e.RolledBack
	what := "release " + e.Release + " was rolled back"
	if rb.Release != e.Release {
		what = "release " + e.Release + " is built on release " + rb.Release + ", which was rolled back"
	}
	return fmt.Sprintf("repository %s: %s at %s by %s (replaced by %s); activate it with force to re-activate it knowingly",
		e.Repository, what, rb.At.UTC().Format(time.RFC3339), rb.By, orNone(rb.ReplacedBy))
}

// Is makes errors.Is(err, ErrRolledBack) true.
func (e *RolledBackError) Is(target error) bool { return target == ErrRolledBack }

// RollbackMarks is the part of Store that remembers rolled-back releases.
//
// A flip marks the release it deactivates as rolled back when it is a rollback, and when
// it activates an ancestor of that release; then every release between the two on the
// chain of parents is marked as well. A flip that is not forced is refused with a
// *RolledBackError when the release it activates is marked, or is built on a marked
// release: its chain of parents reaches a marked release before it reaches the active
// release or a release a rollback activated (whose content is not the rolled-back
// release's, though its parent is). A forced flip clears the marks of the release it
// activates and of its ancestors; when one of those marks was made by the rollback that
// activated the current release, the forced flip undoes that rollback and marks nothing.
// Recording a release without activating it is never refused.
type RollbackMarks interface {
	// RolledBack returns repo's rolled-back releases, oldest release first, or ErrNotFound
	// for an unknown repository.
	RolledBack(ctx context.Context, repo string) ([]RolledBack, error)
}

// verifyRolledBack checks that the active release is not marked rolled back.
func verifyRolledBack(ctx context.Context, st Store, repo, active string) error {
	marks, err := st.RolledBack(ctx, repo)
	if err != nil {
		return fmt.Errorf("repository %s: rolled-back releases: %w", repo, err)
	}
	for _, m := range marks {
		if m.Release == active {
			return fmt.Errorf("repository %s: the active release %s is marked rolled back", repo, active)
		}
	}
	return nil
}

// CheckRolledBack refuses to activate id when it, or a release it is built on, is
// marked rolled back (marks by release id). The walk up the chain of parents, through
// get, stops at the active release and at a release a rollback activated (both are
// accepted content), and below the oldest marked release (nothing older can be marked).
// Every state store applies this one rule inside its activation transaction.
func CheckRolledBack(repo, id, active string, marks map[string]RolledBack, get func(id string) (Release, bool, error)) error {
	if len(marks) == 0 {
		return nil
	}
	stop := map[string]bool{active: true}
	oldest := uint64(0)
	for _, x := range marks {
		stop[x.ReplacedBy] = true
		if oldest == 0 || x.Seq < oldest {
			oldest = x.Seq
		}
	}
	for cur := id; cur != ""; {
		if x, ok := marks[cur]; ok {
			return &RolledBackError{Repository: repo, Release: id, RolledBack: x}
		}
		if stop[cur] {
			return nil
		}
		rel, ok, err := get(cur)
		if err != nil || !ok || rel.Seq < oldest {
			return err // an unknown release is the caller's ErrNotFound
		}
		cur = rel.Parent
	}
	return nil
}
