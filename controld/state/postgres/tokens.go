package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/armor-apt/armor/controld/state"
)

// CreateToken implements state.Store.
func (s *Store) CreateToken(ctx context.Context, t state.Token) error {
	return s.write(ctx, func(tx pgx.Tx) error {
		var byName, byHash bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM tokens WHERE name = $1), EXISTS (SELECT 1 FROM tokens WHERE hash = $2)`,
			t.Name, t.Hash).Scan(&byName, &byHash); err != nil {
			return err
		}
		if byName {
			return fmt.Errorf("token %s: %w", t.Name, state.ErrExists)
		}
		if byHash {
			return fmt.Errorf("token %s: a token with the same secret: %w", t.Name, state.ErrExists)
		}
		_, err := tx.Exec(ctx, `INSERT INTO tokens (name, hash, doc) VALUES ($1, $2, $3)`, t.Name, t.Hash, encode(t))
		return err
	})
}

func scanToken(row pgx.Row, what string) (state.Token, error) {
	var t state.Token
	var doc []byte
	err := row.Scan(&doc)
	if errors.Is(err, pgx.ErrNoRows) {
		return t, fmt.Errorf("token%s: %w", what, state.ErrNotFound)
	}
	if err != nil {
		return t, err
	}
	return t, decode(doc, &t, "token"+what)
}

// TokenByHash implements state.Store. It is one statement, outside a transaction: every
// API call makes it.
func (s *Store) TokenByHash(ctx context.Context, hash string) (state.Token, error) {
	t, err := scanToken(s.pool.QueryRow(ctx, `SELECT doc FROM tokens WHERE hash = $1`, hash), "")
	return t, classify(err)
}

// Tokens implements state.Store.
func (s *Store) Tokens(ctx context.Context) (out []state.Token, err error) {
	err = s.read(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT name, doc FROM tokens ORDER BY name COLLATE "C"`)
		if err != nil {
			return err
		}
		var name string
		var doc []byte
		_, err = pgx.ForEachRow(rows, []any{&name, &doc}, func() error {
			var t state.Token
			if err := decode(doc, &t, "token "+name); err != nil {
				return err
			}
			out = append(out, t)
			return nil
		})
		return err
	})
	return out, err
}

// RevokeToken implements state.Store.
func (s *Store) RevokeToken(ctx context.Context, name, by string, at time.Time) (t state.Token, err error) {
	err = s.write(ctx, func(tx pgx.Tx) error {
		t, err = scanToken(tx.QueryRow(ctx, `SELECT doc FROM tokens WHERE name = $1`, name), " "+name)
		if err != nil || t.Revoked() {
			return err
		}
		t.RevokedAt, t.RevokedBy = at, by
		_, err = tx.Exec(ctx, `UPDATE tokens SET doc = $2 WHERE name = $1`, name, encode(t))
		return err
	})
	return t, err
}
