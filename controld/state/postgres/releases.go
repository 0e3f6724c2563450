package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/armor-apt/armor/controld/state"
)

// repoExists returns ErrNotFound for an unknown repository.
func repoExists(ctx context.Context, tx pgx.Tx, repo string) error {
	var ok bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM repositories WHERE name = $1)`, repo).Scan(&ok); err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("repository %s: %w", repo, state.ErrNotFound)
	}
	return nil
}

// getRelease reads one release; ok is false when it is not recorded (or the repository
// is unknown).
func getRelease(ctx context.Context, tx pgx.Tx, repo, id string) (rel state.Release, ok bool, err error) {
	var doc []byte
	err = tx.QueryRow(ctx, `SELECT doc FROM releases WHERE repository = $1 AND id = $2`, repo, id).Scan(&doc)
	if errors.Is(err, pgx.ErrNoRows) {
		return rel, false, nil
	}
	if err != nil {
		return rel, false, err
	}
	return rel, true, decode(doc, &rel, "release "+id)
}

// RecordRelease implements state.Store.
func (s *Store) RecordRelease(ctx context.Context, rel state.Release, flip *state.Flip) (out state.Recorded, err error) {
	err = s.write(ctx, func(tx pgx.Tx) error {
		out = state.Recorded{}
		if err := repoExists(ctx, tx, rel.Repository); err != nil {
			return err
		}
		prev, exists, err := getRelease(ctx, tx, rel.Repository, rel.ID)
		if err != nil {
			return err
		}
		if exists {
			out.Release = prev
		} else {
			if err := insertRelease(ctx, tx, &rel); err != nil {
				return err
			}
			out.Release, out.Created = rel, true
			ev := state.Event{Type: state.EventRecord, Repository: rel.Repository, At: rel.PushedAt, By: rel.PushedBy, Release: &rel}
			if _, _, err := appendEvent(ctx, tx, ev, rel.PushedAt); err != nil {
				return err
			}
		}
		if flip != nil {
			f := *flip
			f.Repository, f.To = rel.Repository, rel.ID
			a, err := activate(ctx, tx, f)
			if err != nil {
				return err
			}
			out.Activation = &a
		}
		return nil
	})
	return out, err
}

func insertRelease(ctx context.Context, tx pgx.Tx, rel *state.Release) error {
	if rel.Parent == "" {
		var any bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM releases WHERE repository = $1)`, rel.Repository).Scan(&any); err != nil {
			return err
		}
		if any {
			return fmt.Errorf("release %s has no parent, but repository %s has releases already: %w", rel.ID, rel.Repository, state.ErrUnknownParent)
		}
	} else if _, ok, err := getRelease(ctx, tx, rel.Repository, rel.Parent); err != nil {
		return err
	} else if !ok {
		return fmt.Errorf("release %s: parent %s is not recorded in repository %s: %w", rel.ID, rel.Parent, rel.Repository, state.ErrUnknownParent)
	}
	var seq int64
	if err := tx.QueryRow(ctx, `UPDATE repositories SET release_seq = release_seq + 1 WHERE name = $1 RETURNING release_seq`, rel.Repository).Scan(&seq); err != nil {
		return err
	}
	rel.Seq = uint64(seq)
	_, err := tx.Exec(ctx, `INSERT INTO releases (repository, id, seq, doc) VALUES ($1, $2, $3, $4)`,
		rel.Repository, rel.ID, seq, encode(rel))
	return err
}

// Release implements state.Store.
func (s *Store) Release(ctx context.Context, repo, id string) (rel state.Release, err error) {
	err = s.read(ctx, func(tx pgx.Tx) error {
		if err := repoExists(ctx, tx, repo); err != nil {
			return err
		}
		var ok bool
		rel, ok, err = getRelease(ctx, tx, repo, id)
		if err == nil && !ok {
			err = fmt.Errorf("release %s of repository %s: %w", id, repo, state.ErrNotFound)
		}
		return err
	})
	return rel, err
}

// Releases implements state.Store.
func (s *Store) Releases(ctx context.Context, repo string) (out []state.Release, err error) {
	err = s.read(ctx, func(tx pgx.Tx) error {
		out, err = releasesIn(ctx, tx, repo)
		return err
	})
	return out, err
}

// releasesIn returns repo's releases in recording order; ErrNotFound for an unknown
// repository.
func releasesIn(ctx context.Context, tx pgx.Tx, repo string) ([]state.Release, error) {
	if err := repoExists(ctx, tx, repo); err != nil {
		return nil, err
	}
	rows, err := tx.Query(ctx, `SELECT doc FROM releases WHERE repository = $1 ORDER BY seq`, repo)
	if err != nil {
		return nil, err
	}
	var out []state.Release
	var doc []byte
	_, err = pgx.ForEachRow(rows, []any{&doc}, func() error {
		var rel state.Release
		if err := decode(doc, &rel, "release of "+repo); err != nil {
			return err
		}
		out = append(out, rel)
		return nil
	})
	return out, err
}

// historyIn returns repo's history, oldest first; ErrNotFound for an unknown repository.
func historyIn(ctx context.Context, tx pgx.Tx, repo string) ([]state.Activation, error) {
	if err := repoExists(ctx, tx, repo); err != nil {
		return nil, err
	}
	rows, err := tx.Query(ctx, `SELECT doc FROM history WHERE repository = $1 ORDER BY seq`, repo)
	if err != nil {
		return nil, err
	}
	var out []state.Activation
	var doc []byte
	_, err = pgx.ForEachRow(rows, []any{&doc}, func() error {
		var a state.Activation
		if err := decode(doc, &a, "history entry of "+repo); err != nil {
			return err
		}
		out = append(out, a)
		return nil
	})
	return out, err
}

// Activate implements state.Store.
func (s *Store) Activate(ctx context.Context, f state.Flip) (a state.Activation, err error) {
	err = s.write(ctx, func(tx pgx.Tx) error {
		a, err = activate(ctx, tx, f)
		return err
	})
	return a, err
}

// activate is the compare-and-swap, inside a write transaction. It follows the bbolt
// store's activate step by step.
func activate(ctx context.Context, tx pgx.Tx, f state.Flip) (state.Activation, error) {
	r, err := getRepo(ctx, tx, f.Repository)
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
		if err := checkRolledBack(ctx, tx, r.Name, f.To, current); err != nil {
			return state.Activation{}, err
		}
	}
	if current != f.Expect {
		return state.Activation{}, &state.ConflictError{Repository: r.Name, Expected: f.Expect, Active: current}
	}
	var last state.Activation
	var doc []byte
	err = tx.QueryRow(ctx, `SELECT doc FROM history WHERE repository = $1 ORDER BY seq DESC LIMIT 1`, r.Name).Scan(&doc)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
	case err != nil:
		return state.Activation{}, err
	default:
		if err := decode(doc, &last, "history entry of "+r.Name); err != nil {
			return state.Activation{}, err
		}
	}
	if f.Rollback && f.To == "" {
		if last.From == "" {
			return state.Activation{}, fmt.Errorf("repository %s: %w", r.Name, state.ErrNoPrevious)
		}
		f.To = last.From
	}
	rel, ok, err := getRelease(ctx, tx, r.Name, f.To)
	if err != nil {
		return state.Activation{}, err
	}
	if !ok {
		return state.Activation{}, fmt.Errorf("release %s of repository %s: %w", f.To, r.Name, state.ErrNotFound)
	}
	if f.To == current {
		return last, nil
	}
	if err := rolledBackFlip(ctx, tx, r.Name, f, current); err != nil {
		return state.Activation{}, err
	}
	a := state.Activation{Repository: r.Name, Seq: last.Seq + 1, From: current, To: f.To, By: f.By, At: f.At, Rollback: f.Rollback}
	if _, err := tx.Exec(ctx, `INSERT INTO history (repository, seq, doc) VALUES ($1, $2, $3)`, r.Name, int64(a.Seq), encode(a)); err != nil {
		return state.Activation{}, err
	}
	r.Retired = slices.DeleteFunc(r.Retired, func(x state.Retired) bool { return x.Release == f.To || x.Release == current })
	if r.Active != nil {
		r.Retired = slices.Insert(r.Retired, 0, state.Retired{Release: current, Manifest: r.Active.Manifest, DeactivatedAt: f.At})
	}
	r.Active = &state.Pointer{Release: f.To, Manifest: rel.Manifest, At: f.At, By: f.By}
	if err := putRepo(ctx, tx, r); err != nil {
		return state.Activation{}, err
	}
	v, err := bumpVersion(ctx, tx)
	if err != nil {
		return state.Activation{}, err
	}
	_, _, err = appendEvent(ctx, tx, state.ActivationEvent(a, rel, v), f.At)
	return a, err
}

// History implements state.Store.
func (s *Store) History(ctx context.Context, repo string) (out []state.Activation, err error) {
	err = s.read(ctx, func(tx pgx.Tx) error {
		out, err = historyIn(ctx, tx, repo)
		return err
	})
	return out, err
}
