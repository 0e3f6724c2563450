package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/armor-apt/armor/controld/state"
)

// MarkMissing implements state.MissingObjects.
func (s *Store) MarkMissing(ctx context.Context, repo string, objs []state.MissingObject) error {
	return s.write(ctx, func(tx pgx.Tx) error {
		if err := repoExists(ctx, tx, repo); err != nil {
			return err
		}
		for _, o := range objs {
			if _, err := tx.Exec(ctx, `INSERT INTO missing_objects (repository, sha256, doc) VALUES ($1, $2, $3)
				ON CONFLICT (repository, sha256) DO UPDATE SET doc = EXCLUDED.doc`, repo, o.SHA256, encode(o)); err != nil {
				return err
			}
		}
		return nil
	})
}

// ClearMissing implements state.MissingObjects.
func (s *Store) ClearMissing(ctx context.Context, repo string, sums []string) error {
	return s.write(ctx, func(tx pgx.Tx) error {
		if err := repoExists(ctx, tx, repo); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `DELETE FROM missing_objects WHERE repository = $1 AND sha256 = ANY($2)`, repo, sums)
		return err
	})
}

// Missing implements state.MissingObjects.
func (s *Store) Missing(ctx context.Context, repo string) (out []state.MissingObject, err error) {
	err = s.read(ctx, func(tx pgx.Tx) error {
		if err := repoExists(ctx, tx, repo); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT sha256, doc FROM missing_objects WHERE repository = $1 ORDER BY sha256 COLLATE "C"`, repo)
		if err != nil {
			return err
		}
		var sum string
		var doc []byte
		_, err = pgx.ForEachRow(rows, []any{&sum, &doc}, func() error {
			var o state.MissingObject
			if err := decode(doc, &o, "missing object "+sum); err != nil {
				return err
			}
			out = append(out, o)
			return nil
		})
		return err
	})
	return out, err
}
