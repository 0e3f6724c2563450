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

// bDeleted holds, per repository, the records of deleted releases by id. It is created
// by the first deletion, so databases written before it need no migration.
var bDeleted = []byte("deleted")

// DeleteRelease implements state.Deleter.
func (s *Store) DeleteRelease(ctx context.Context, d state.Deletion) (rel state.Release, err error) {
	err = s.update(ctx, func(tx *bbolt.Tx) error {
		r, err := getRepo(tx, d.Repository)
		if err != nil {
			return err
		}
		var ok bool
		rel, ok, err = getRelease(tx, d.Repository, d.ID)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("release %s of repository %s: %w", d.ID, d.Repository, state.ErrNotFound)
		}
		rels, err := releasesIn(tx, d.Repository)
		if err != nil {
			return err
		}
		hist, err := historyIn(tx, d.Repository)
		if err != nil {
			return err
		}
		if why, kept := state.Kept(r, rels, hist, d.At, d.Policy)[d.ID]; kept {
			return &state.KeptError{Repository: d.Repository, Release: d.ID, Reason: why}
		}
		all, err := tx.CreateBucketIfNotExists(bDeleted)
		if err != nil {
			return err
		}
		gone, err := all.CreateBucketIfNotExists([]byte(d.Repository))
		if err != nil {
			return err
		}
		if err := putJSON(gone, []byte(d.ID), state.Deleted{Release: rel, DeletedAt: d.At, DeletedBy: d.By}); err != nil {
			return err
		}
		b, err := repoBucket(tx, bReleases, d.Repository)
		if err != nil {
			return err
		}
		if err := b.Delete([]byte(d.ID)); err != nil {
			return err
		}
		n := len(r.Retired)
		r.Retired = slices.DeleteFunc(r.Retired, func(x state.Retired) bool { return x.Release == d.ID })
		if len(r.Retired) != n {
			return putRepo(tx, r)
		}
		return nil
	})
	return rel, err
}

// DeletedReleases implements state.Deleter.
func (s *Store) DeletedReleases(ctx context.Context, repo string) (out []state.Deleted, err error) {
	err = s.view(ctx, func(tx *bbolt.Tx) error {
		if _, err := getRepo(tx, repo); err != nil {
			return err
		}
		all := tx.Bucket(bDeleted)
		if all == nil {
			return nil
		}
		b := all.Bucket([]byte(repo))
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			var d state.Deleted
			if err := json.Unmarshal(v, &d); err != nil {
				return fmt.Errorf("decode deleted release %q: %w", k, err)
			}
			out = append(out, d)
			return nil
		})
	})
	slices.SortFunc(out, func(a, b state.Deleted) int {
		if c := a.DeletedAt.Compare(b.DeletedAt); c != 0 {
			return c
		}
		return cmp.Compare(a.Release.Seq, b.Release.Seq)
	})
	return out, err
}

// releasesIn returns repo's releases, inside a transaction, in recording order.
func releasesIn(tx *bbolt.Tx, repo string) ([]state.Release, error) {
	b, err := repoBucket(tx, bReleases, repo)
	if err != nil {
		return nil, err
	}
	var out []state.Release
	err = b.ForEach(func(k, v []byte) error {
		var rel state.Release
		if err := json.Unmarshal(v, &rel); err != nil {
			return fmt.Errorf("decode release %q: %w", k, err)
		}
		out = append(out, rel)
		return nil
	})
	slices.SortFunc(out, func(a, b state.Release) int { return cmp.Compare(a.Seq, b.Seq) })
	return out, err
}

// historyIn returns repo's history, inside a transaction, oldest first.
func historyIn(tx *bbolt.Tx, repo string) ([]state.Activation, error) {
	b, err := repoBucket(tx, bHistory, repo)
	if err != nil {
		return nil, err
	}
	var out []state.Activation
	err = b.ForEach(func(k, v []byte) error {
		var a state.Activation
		if err := json.Unmarshal(v, &a); err != nil {
			return fmt.Errorf("decode history entry %x: %w", k, err)
		}
		out = append(out, a)
		return nil
	})
	return out, err
}
