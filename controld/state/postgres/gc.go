package postgres

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/armor-apt/armor/controld/state"
)

// DeleteRelease implements state.Deleter.
func (s *Store) DeleteRelease(ctx context.Context, d state.Deletion) (rel state.Release, err error) {
	err = s.write(ctx, func(tx pgx.Tx) error {
		r, err := getRepo(ctx, tx, d.Repository)
		if err != nil {
			return err
		}
		var ok bool
		rel, ok, err = getRelease(ctx, tx, d.Repository, d.ID)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("release %s of repository %s: %w", d.ID, d.Repository, state.ErrNotFound)
		}
		rels, err := releasesIn(ctx, tx, d.Repository)
		if err != nil {
			return err
		}
		hist, err := historyIn(ctx, tx, d.Repository)
		if err != nil {
			return err
		}
		if why, kept := state.Kept(r, rels, hist, d.At, d.Policy)[d.ID]; kept {
			return &state.KeptError{Repository: d.Repository, Release: d.ID, Reason: why}
		}
		gone := state.Deleted{Release: rel, DeletedAt: d.At, DeletedBy: d.By}
		if _, err := tx.Exec(ctx, `INSERT INTO deleted_releases (repository, id, doc) VALUES ($1, $2, $3)
			ON CONFLICT (repository, id) DO UPDATE SET doc = EXCLUDED.doc`, d.Repository, d.ID, encode(gone)); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM releases WHERE repository = $1 AND id = $2`, d.Repository, d.ID); err != nil {
			return err
		}
		n := len(r.Retired)
		r.Retired = slices.DeleteFunc(r.Retired, func(x state.Retired) bool { return x.Release == d.ID })
		if len(r.Retired) != n {
			return putRepo(ctx, tx, r)
		}
		return nil
	})
	return rel, err
}

// DeletedReleases implements state.Deleter.
func (s *Store) DeletedReleases(ctx context.Context, repo string) (out []state.Deleted, err error) {
	err = s.read(ctx, func(tx pgx.Tx) error {
		if err := repoExists(ctx, tx, repo); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT id, doc FROM deleted_releases WHERE repository = $1`, repo)
		if err != nil {
			return err
		}
		var id string
		var doc []byte
		_, err = pgx.ForEachRow(rows, []any{&id, &doc}, func() error {
			var d state.Deleted
			if err := decode(doc, &d, "deleted release "+id); err != nil {
				return err
			}
			out = append(out, d)
			return nil
		})
		return err
	})
	slices.SortFunc(out, func(a, b state.Deleted) int {
		if c := a.DeletedAt.Compare(b.DeletedAt); c != 0 {
			return c
		}
		return cmp.Compare(a.Release.Seq, b.Release.Seq)
	})
	return out, err
}
