package bolt

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/armor-apt/armor/controld/state"
)

// CreateToken implements state.Store.
func (s *Store) CreateToken(ctx context.Context, t state.Token) error {
	return s.update(ctx, func(tx *bbolt.Tx) error {
		tokens, byHash := tx.Bucket(bTokens), tx.Bucket(bTokenHash)
		if tokens.Get([]byte(t.Name)) != nil {
			return fmt.Errorf("token %s: %w", t.Name, state.ErrExists)
		}
		if byHash.Get([]byte(t.Hash)) != nil {
			return fmt.Errorf("token %s: a token with the same secret: %w", t.Name, state.ErrExists)
		}
		if err := byHash.Put([]byte(t.Hash), []byte(t.Name)); err != nil {
			return err
		}
		return putJSON(tokens, []byte(t.Name), t)
	})
}

// TokenByHash implements state.Store.
func (s *Store) TokenByHash(ctx context.Context, hash string) (t state.Token, err error) {
	err = s.view(ctx, func(tx *bbolt.Tx) error {
		name := tx.Bucket(bTokenHash).Get([]byte(hash))
		if name == nil {
			return fmt.Errorf("token: %w", state.ErrNotFound)
		}
		ok, err := getJSON(tx.Bucket(bTokens), string(name), &t)
		if err == nil && !ok {
			err = fmt.Errorf("token %s: %w", name, state.ErrNotFound)
		}
		return err
	})
	return t, err
}

// Tokens implements state.Store.
func (s *Store) Tokens(ctx context.Context) (out []state.Token, err error) {
	err = s.view(ctx, func(tx *bbolt.Tx) error {
		return tx.Bucket(bTokens).ForEach(func(k, v []byte) error {
			var t state.Token
			if err := json.Unmarshal(v, &t); err != nil {
				return fmt.Errorf("decode token %q: %w", k, err)
			}
			out = append(out, t)
			return nil
		})
	})
	return out, err
}

// RevokeToken implements state.Store.
func (s *Store) RevokeToken(ctx context.Context, name, by string, at time.Time) (t state.Token, err error) {
	err = s.update(ctx, func(tx *bbolt.Tx) error {
		tokens := tx.Bucket(bTokens)
		ok, err := getJSON(tokens, name, &t)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("token %s: %w", name, state.ErrNotFound)
		}
		if t.Revoked() {
			return nil
		}
		t.RevokedAt, t.RevokedBy = at, by
		return putJSON(tokens, []byte(name), t)
	})
	return t, err
}
