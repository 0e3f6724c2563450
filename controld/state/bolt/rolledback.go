package bolt

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/armor-apt/armor/controld/state"
)

// bRolledBack holds rolledback/<repo> (release id → JSON state.RolledBack). It is made
// on the first mark, so a database written before marks existed needs no migration.
var bRolledBack = []byte("rolledback")

// marks reads repo's rolled-back releases.
func marks(tx *bbolt.Tx, repo string) (map[string]state.RolledBack, error) {
	out := map[string]state.RolledBack{}
	b := tx.Bucket(bRolledBack)
	if b != nil {
		b = b.Bucket([]byte(repo))
	}
	if b == nil {
		return out, nil
	}
	err := b.ForEach(func(k, v []byte) error {
		var m state.RolledBack
		if err := json.Unmarshal(v, &m); err != nil {
			return fmt.Errorf("decode rolled-back mark %q: %w", k, err)
		}
		out[string(k)] = m
		return nil
	})
	return out, err
}

// marksBucket returns rolledback/<repo>, made if missing (in a write transaction).
func marksBucket(tx *bbolt.Tx, repo string) (*bbolt.Bucket, error) {
	root, err := tx.CreateBucketIfNotExists(bRolledBack)
	if err != nil {
		return nil, err
	}
	return root.CreateBucketIfNotExists([]byte(repo))
}

// RolledBack implements state.RollbackMarks.
func (s *Store) RolledBack(ctx context.Context, repo string) (out []state.RolledBack, err error) {
	err = s.view(ctx, func(tx *bbolt.Tx) error {
		if _, err := getRepo(tx, repo); err != nil {
			return err
		}
		m, err := marks(tx, repo)
		for _, x := range m {
			out = append(out, x)
		}
		return err
	})
	slices.SortFunc(out, func(a, b state.RolledBack) int { return cmp.Compare(a.Seq, b.Seq) })
	return out, err
}

// checkRolledBack applies state.CheckRolledBack in the transaction.
func checkRolledBack(tx *bbolt.Tx, repo, id, active string) error {
	m, err := marks(tx, repo)
	if err != nil {
		return err
	}
	return state.CheckRolledBack(repo, id, active, m, func(id string) (state.Release, bool, error) {
		return getRelease(tx, repo, id)
	})
}

// clearRolledBack removes the marks of id and of every release it is built on: a forced
// activation of id takes their content back knowingly. It returns the marks it removed.
func clearRolledBack(tx *bbolt.Tx, repo, id string) (cleared []state.RolledBack, err error) {
	m, err := marks(tx, repo)
	if err != nil || len(m) == 0 {
		return nil, err
	}
	b, err := marksBucket(tx, repo)
	if err != nil {
		return nil, err
	}
	oldest := uint64(0)
	for _, x := range m {
		if oldest == 0 || x.Seq < oldest {
			oldest = x.Seq
		}
	}
	for cur := id; cur != ""; {
		if x, ok := m[cur]; ok {
			if err := b.Delete([]byte(cur)); err != nil {
				return nil, err
			}
			cleared = append(cleared, x)
		}
		rel, ok, err := getRelease(tx, repo, cur)
		if err != nil || !ok || rel.Seq <= oldest {
			return cleared, err
		}
		cur = rel.Parent
	}
	return cleared, nil
}

// markRolledBack marks what a flip from → to rolls back: from when the flip is a
// rollback, and, when to is an ancestor of from, every release from from down to (not
// including) to. A release marked already keeps its first mark.
func markRolledBack(tx *bbolt.Tx, repo, from, to string, rollback bool, by string, at time.Time) error {
	if from == "" || from == to {
		return nil
	}
	target, ok, err := getRelease(tx, repo, to)
	if err != nil || !ok {
		return err
	}
	first, ok, err := getRelease(tx, repo, from)
	if err != nil || !ok {
		return err
	}
	chain := []state.Release{first}
	ancestor := false
	for cur := first.Parent; cur != ""; {
		if cur == to {
			ancestor = true
			break
		}
		rel, ok, err := getRelease(tx, repo, cur)
		if err != nil {
			return err
		}
		if !ok || rel.Seq < target.Seq {
			// Parents are recorded before their children: below to's Seq, to is not
			// on the chain.
			break
		}
		chain = append(chain, rel)
		cur = rel.Parent
	}
	if !ancestor {
		if !rollback {
			return nil
		}
		chain = chain[:1]
	}
	m, err := marks(tx, repo)
	if err != nil {
		return err
	}
	b, err := marksBucket(tx, repo)
	if err != nil {
		return err
	}
	for _, rel := range chain {
		if _, ok := m[rel.ID]; ok {
			continue
		}
		x := state.RolledBack{Release: rel.ID, Seq: rel.Seq, ReplacedBy: to, At: at, By: by}
		if err := putJSON(b, []byte(rel.ID), x); err != nil {
			return err
		}
	}
	return nil
}

// rolledBackFlip applies the rollback marks to a flip from current to f.To, before it
// is written: a rollback to a marked release is refused unless forced, a forced flip
// clears the marks of what it activates, and what the flip rolls back is marked. A
// forced flip that undoes a rollback (it clears a mark whose rollback activated the
// current release) marks nothing: the release a re-signed rollback activated is a child
// of the one it rolled back, and must not be marked as if the flip skipped it.
func rolledBackFlip(tx *bbolt.Tx, repo string, f state.Flip, current string) error {
	switch {
	case f.Force:
		cleared, err := clearRolledBack(tx, repo, f.To)
		if err != nil {
			return err
		}
		for _, x := range cleared {
			if x.ReplacedBy == current && !f.Rollback {
				return nil
			}
		}
	case f.Rollback:
		if err := checkRolledBack(tx, repo, f.To, current); err != nil {
			return err
		}
	}
	return markRolledBack(tx, repo, current, f.To, f.Rollback, f.By, f.At)
}
