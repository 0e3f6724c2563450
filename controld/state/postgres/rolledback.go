package postgres

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/armor-apt/armor/controld/state"
)

// The rollback marks follow the bbolt store's rules (state.RollbackMarks) step by step.

// marks reads repo's rolled-back releases.
func marks(ctx context.Context, tx pgx.Tx, repo string) (map[string]state.RolledBack, error) {
	rows, err := tx.Query(ctx, `SELECT release, doc FROM rolled_back WHERE repository = $1`, repo)
	if err != nil {
		return nil, err
	}
	out := map[string]state.RolledBack{}
	var id string
	var doc []byte
	_, err = pgx.ForEachRow(rows, []any{&id, &doc}, func() error {
		var m state.RolledBack
		if err := decode(doc, &m, "rolled-back mark "+id); err != nil {
			return err
		}
		out[id] = m
		return nil
	})
	return out, err
}

// RolledBack implements state.RollbackMarks.
func (s *Store) RolledBack(ctx context.Context, repo string) (out []state.RolledBack, err error) {
	err = s.read(ctx, func(tx pgx.Tx) error {
		if err := repoExists(ctx, tx, repo); err != nil {
			return err
		}
		m, err := marks(ctx, tx, repo)
		for _, x := range m {
			out = append(out, x)
		}
		return err
	})
	slices.SortFunc(out, func(a, b state.RolledBack) int { return cmp.Compare(a.Seq, b.Seq) })
	return out, err
}

// checkRolledBack applies state.CheckRolledBack in the transaction.
func checkRolledBack(ctx context.Context, tx pgx.Tx, repo, id, active string) error {
	m, err := marks(ctx, tx, repo)
	if err != nil {
		return err
	}
	return state.CheckRolledBack(repo, id, active, m, func(id string) (state.Release, bool, error) {
		return getRelease(ctx, tx, repo, id)
	})
}

// clearRolledBack removes the marks of id and of every release it is built on, and
// returns the marks it removed.
func clearRolledBack(ctx context.Context, tx pgx.Tx, repo, id string) (cleared []state.RolledBack, err error) {
	m, err := marks(ctx, tx, repo)
	if err != nil || len(m) == 0 {
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
			if _, err := tx.Exec(ctx, `DELETE FROM rolled_back WHERE repository = $1 AND release = $2`, repo, cur); err != nil {
				return nil, err
			}
			cleared = append(cleared, x)
		}
		rel, ok, err := getRelease(ctx, tx, repo, cur)
		if err != nil || !ok || rel.Seq <= oldest {
			return cleared, err
		}
		cur = rel.Parent
	}
	return cleared, nil
}

// markRolledBack marks what a flip from → to rolls back (see the bbolt store's
// markRolledBack).
func markRolledBack(ctx context.Context, tx pgx.Tx, repo, from, to string, rollback bool, by string, at time.Time) error {
	if from == "" || from == to {
		return nil
	}
	target, ok, err := getRelease(ctx, tx, repo, to)
	if err != nil || !ok {
		return err
	}
	first, ok, err := getRelease(ctx, tx, repo, from)
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
		rel, ok, err := getRelease(ctx, tx, repo, cur)
		if err != nil {
			return err
		}
		if !ok || rel.Seq < target.Seq {
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
	for _, rel := range chain {
		x := state.RolledBack{Release: rel.ID, Seq: rel.Seq, ReplacedBy: to, At: at, By: by}
		// A release marked already keeps its first mark.
		if _, err := tx.Exec(ctx, `INSERT INTO rolled_back (repository, release, doc) VALUES ($1, $2, $3)
			ON CONFLICT (repository, release) DO NOTHING`, repo, rel.ID, encode(x)); err != nil {
			return err
		}
	}
	return nil
}

// rolledBackFlip applies the rollback marks to a flip from current to f.To, before it
// is written (see the bbolt store's rolledBackFlip).
func rolledBackFlip(ctx context.Context, tx pgx.Tx, repo string, f state.Flip, current string) error {
	switch {
	case f.Force:
		cleared, err := clearRolledBack(ctx, tx, repo, f.To)
		if err != nil {
			return err
		}
		for _, x := range cleared {
			if x.ReplacedBy == current && !f.Rollback {
				return nil
			}
		}
	case f.Rollback:
		if err := checkRolledBack(ctx, tx, repo, f.To, current); err != nil {
			return err
		}
	}
	return markRolledBack(ctx, tx, repo, current, f.To, f.Rollback, f.By, f.At)
}
