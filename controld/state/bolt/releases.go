package bolt

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"

	bbolt "go.etcd.io/bbolt"

	"github.com/armor-apt/armor/controld/state"
)

// repoBucket returns the sub-bucket of parent (releases or history) for repo.
func repoBucket(tx *bbolt.Tx, parent []byte, repo string) (*bbolt.Bucket, error) {
	b := tx.Bucket(parent).Bucket([]byte(repo))
	if b == nil {
		return nil, fmt.Errorf("repository %s: %w", repo, state.ErrNotFound)
	}
	return b, nil
}

func getRelease(tx *bbolt.Tx, repo, id string) (state.Release, bool, error) {
	var rel state.Release
	b, err := repoBucket(tx, bReleases, repo)
	if err != nil {
		return rel, false, err
	}
	ok, err := getJSON(b, id, &rel)
	return rel, ok, err
}

// RecordRelease implements state.Store.
func (s *Store) RecordRelease(ctx context.Context, rel state.Release, flip *state.Flip) (out state.Recorded, err error) {
	err = s.update(ctx, func(tx *bbolt.Tx) error {
		out = state.Recorded{}
		prev, exists, err := getRelease(tx, rel.Repository, rel.ID)
		if err != nil {
			return err
		}
		if exists {
			out.Release = prev
		} else {
			if err := insertRelease(tx, &rel); err != nil {
				return err
			}
			out.Release, out.Created = rel, true
			ev := state.Event{Type: state.EventRecord, Repository: rel.Repository, At: rel.PushedAt, By: rel.PushedBy, Release: &rel}
			if _, _, err := appendEvent(tx, ev, rel.PushedAt); err != nil {
				return err
			}
		}
		if flip != nil {
			f := *flip
			f.Repository, f.To = rel.Repository, rel.ID
			a, err := activate(tx, f)
			if err != nil {
				return err
			}
			out.Activation = &a
		}
		return nil
	})
	return out, err
}

func insertRelease(tx *bbolt.Tx, rel *state.Release) error {
	b, err := repoBucket(tx, bReleases, rel.Repository)
	if err != nil {
		return err
	}
	if rel.Parent == "" {
		if k, _ := b.Cursor().First(); k != nil {
			return fmt.Errorf("release %s has no parent, but repository %s has releases already: %w", rel.ID, rel.Repository, state.ErrUnknownParent)
		}
	} else if b.Get([]byte(rel.Parent)) == nil {
		return fmt.Errorf("release %s: parent %s is not recorded in repository %s: %w", rel.ID, rel.Parent, rel.Repository, state.ErrUnknownParent)
	}
	seq, err := b.NextSequence()
	if err != nil {
		return err
	}
	rel.Seq = seq
	return putJSON(b, []byte(rel.ID), rel)
}

// Release implements state.Store.
func (s *Store) Release(ctx context.Context, repo, id string) (rel state.Release, err error) {
	err = s.view(ctx, func(tx *bbolt.Tx) error {
		var ok bool
		rel, ok, err = getRelease(tx, repo, id)
		if err == nil && !ok {
			err = fmt.Errorf("release %s of repository %s: %w", id, repo, state.ErrNotFound)
		}
		return err
	})
	return rel, err
}

// Releases implements state.Store.
func (s *Store) Releases(ctx context.Context, repo string) (out []state.Release, err error) {
	err = s.view(ctx, func(tx *bbolt.Tx) error {
		b, err := repoBucket(tx, bReleases, repo)
		if err != nil {
			return err
		}
		return b.ForEach(func(k, v []byte) error {
			var rel state.Release
			if err := json.Unmarshal(v, &rel); err != nil {
				return fmt.Errorf("decode release %q: %w", k, err)
			}
			out = append(out, rel)
			return nil
		})
	})
	slices.SortFunc(out, func(a, b state.Release) int { return cmp.Compare(a.Seq, b.Seq) })
	return out, err
}

// Activate implements state.Store.
func (s *Store) Activate(ctx context.Context, f state.Flip) (a state.Activation, err error) {
	err = s.update(ctx, func(tx *bbolt.Tx) error {
		a, err = activate(tx, f)
		return err
	})
	return a, err
}

// activate is the compare-and-swap, inside a write transaction.
func activate(tx *bbolt.Tx, f state.Flip) (state.Activation, error) {
	r, err := getRepo(tx, f.Repository)
	if err != nil {
		return state.Activation{}, err
	}
	hist, err := repoBucket(tx, bHistory, f.Repository)
	if err != nil {
		return state.Activation{}, err
	}
	current := ""
	if r.Active != nil {
		current = r.Active.Release
	}
	if !f.Rollback && !f.Force && f.To != current {
		// Before the compare-and-swap: a release built on a rolled-back one fails both,
		// and that it was rolled back is what the caller needs to hear.
		if err := checkRolledBack(tx, r.Name, f.To, current); err != nil {
			return state.Activation{}, err
		}
	}
	if current != f.Expect {
		return state.Activation{}, &state.ConflictError{Repository: r.Name, Expected: f.Expect, Active: current}
	}
	var last state.Activation
	if k, v := hist.Cursor().Last(); k != nil {
		if err := json.Unmarshal(v, &last); err != nil {
			return state.Activation{}, fmt.Errorf("decode history entry %x: %w", k, err)
		}
	}
	if f.Rollback && f.To == "" {
		if last.From == "" {
			return state.Activation{}, fmt.Errorf("repository %s: %w", r.Name, state.ErrNoPrevious)
		}
		f.To = last.From
	}
	rel, ok, err := getRelease(tx, r.Name, f.To)
	if err != nil {
		return state.Activation{}, err
	}
	if !ok {
		return state.Activation{}, fmt.Errorf("release %s of repository %s: %w", f.To, r.Name, state.ErrNotFound)
	}
	if f.To == current {
		return last, nil
	}
	if err := rolledBackFlip(tx, r.Name, f, current); err != nil {
		return state.Activation{}, err
	}
	seq, err := hist.NextSequence()
	if err != nil {
		return state.Activation{}, err
	}
	a := state.Activation{Repository: r.Name, Seq: seq, From: current, To: f.To, By: f.By, At: f.At, Rollback: f.Rollback}
	if err := putJSON(hist, u64(seq), a); err != nil {
		return state.Activation{}, err
	}
	r.Retired = slices.DeleteFunc(r.Retired, func(x state.Retired) bool { return x.Release == f.To || x.Release == current })
	if r.Active != nil {
		r.Retired = slices.Insert(r.Retired, 0, state.Retired{Release: current, Manifest: r.Active.Manifest, DeactivatedAt: f.At})
	}
	r.Active = &state.Pointer{Release: f.To, Manifest: rel.Manifest, At: f.At, By: f.By}
	if err := putRepo(tx, r); err != nil {
		return state.Activation{}, err
	}
	v, err := bumpVersion(tx)
	if err != nil {
		return state.Activation{}, err
	}
	_, _, err = appendEvent(tx, state.ActivationEvent(a, rel, v), f.At)
	return a, err
}

// History implements state.Store.
func (s *Store) History(ctx context.Context, repo string) (out []state.Activation, err error) {
	err = s.view(ctx, func(tx *bbolt.Tx) error {
		b, err := repoBucket(tx, bHistory, repo)
		if err != nil {
			return err
		}
		return b.ForEach(func(k, v []byte) error {
			var a state.Activation
			if err := json.Unmarshal(v, &a); err != nil {
				return fmt.Errorf("decode history entry %x: %w", k, err)
			}
			out = append(out, a)
			return nil
		})
	})
	return out, err
}
