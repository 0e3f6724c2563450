package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/armor-apt/armor/controld/state"
)

// The edges' certificate storage (state.CertStorage). Each call is one statement (or
// one short transaction) outside the global write lock: edges renewing certificates
// never wait for a push, nor a push for them. A lock is one row, taken with an upsert
// that succeeds only where the row is free, expired or the caller's own.

// underKey is the SQL condition "key is $1 or lies under $1/" ("" is every key).
const underKey = `($1 = '' OR key = $1 OR starts_with(key, $1 || '/'))`

// PutCertFile implements state.CertStorage.
func (s *Store) PutCertFile(ctx context.Context, key string, value []byte, at time.Time) error {
	if value == nil {
		value = []byte{} // an empty file, not NULL
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO cert_files (key, value, modified) VALUES ($1, $2, $3)
		ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, modified = EXCLUDED.modified`, key, value, at.UTC().Truncate(time.Microsecond))
	return classify(err)
}

// CertFile implements state.CertStorage.
func (s *Store) CertFile(ctx context.Context, key string) (state.CertFile, error) {
	f := state.CertFile{Key: key}
	err := s.pool.QueryRow(ctx, `SELECT value, modified FROM cert_files WHERE key = $1`, key).Scan(&f.Value, &f.Modified)
	if errors.Is(err, pgx.ErrNoRows) {
		return f, fmt.Errorf("certificate storage key %s: %w", key, state.ErrNotFound)
	}
	f.Modified = f.Modified.UTC()
	return f, classify(err)
}

// DeleteCertFiles implements state.CertStorage.
func (s *Store) DeleteCertFiles(ctx context.Context, key string) (int, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM cert_files WHERE `+underKey, key)
	if err != nil {
		return 0, classify(err)
	}
	return int(tag.RowsAffected()), nil
}

// CertFiles implements state.CertStorage.
func (s *Store) CertFiles(ctx context.Context, prefix string) ([]state.CertFileInfo, error) {
	rows, err := s.pool.Query(ctx, `SELECT key, octet_length(value), modified FROM cert_files WHERE `+underKey+` ORDER BY key`, prefix)
	if err != nil {
		return nil, classify(err)
	}
	var out []state.CertFileInfo
	var f state.CertFileInfo
	_, err = pgx.ForEachRow(rows, []any{&f.Key, &f.Size, &f.Modified}, func() error {
		f.Modified = f.Modified.UTC()
		out = append(out, f)
		return nil
	})
	return out, classify(err)
}

// LockCert implements state.CertStorage.
func (s *Store) LockCert(ctx context.Context, name, holder string, now time.Time, ttl time.Duration) (state.CertLock, bool, error) {
	l := state.CertLock{Name: name}
	err := s.pool.QueryRow(ctx, `INSERT INTO cert_locks (name, holder, until) VALUES ($1, $2, $3)
		ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder, until = EXCLUDED.until
			WHERE cert_locks.until <= $4 OR cert_locks.holder = EXCLUDED.holder
		RETURNING holder, until`, name, holder, now.Add(ttl), now).Scan(&l.Holder, &l.Until)
	if err == nil {
		l.Until = l.Until.UTC()
		return l, true, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return l, false, classify(err)
	}
	// Held by another: say by whom. (If it was freed meanwhile, the caller asks again.)
	err = s.pool.QueryRow(ctx, `SELECT holder, until FROM cert_locks WHERE name = $1`, name).Scan(&l.Holder, &l.Until)
	if errors.Is(err, pgx.ErrNoRows) {
		return l, false, nil
	}
	l.Until = l.Until.UTC()
	return l, false, classify(err)
}

// UnlockCert implements state.CertStorage.
func (s *Store) UnlockCert(ctx context.Context, name, holder string) error {
	var other string
	err := s.pool.QueryRow(ctx, `WITH gone AS (DELETE FROM cert_locks WHERE name = $1 AND holder = $2 RETURNING 1)
		SELECT coalesce((SELECT holder FROM cert_locks WHERE name = $1 AND NOT EXISTS (SELECT 1 FROM gone)), '')`,
		name, holder).Scan(&other)
	if err != nil {
		return classify(err)
	}
	if other != "" && other != holder {
		return fmt.Errorf("certificate lock %s is held by %s, not %s: %w", name, other, holder, state.ErrConflict)
	}
	return nil
}
