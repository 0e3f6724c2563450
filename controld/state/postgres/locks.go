package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Advisory lock keys of the garbage collector's exclusions across replicas (see
// controld/gc.go): recording releases against deleting objects, and one collection at a
// time.
const (
	lockRecording = 0x61726d6f7201
	lockCollect   = 0x61726d6f7202
)

// HoldRecording takes the recording lock shared, across every process on the database:
// recordings go on together, HoldDeletion waits for them. The returned function
// releases it.
func (s *Store) HoldRecording(ctx context.Context) (func(), error) {
	return s.advisory(ctx, `SELECT pg_advisory_lock_shared($1)`, `SELECT pg_advisory_unlock_shared($1)`, lockRecording)
}

// HoldDeletion takes the recording lock exclusively: no process records a release until
// the returned function releases it.
func (s *Store) HoldDeletion(ctx context.Context) (func(), error) {
	return s.advisory(ctx, `SELECT pg_advisory_lock($1)`, `SELECT pg_advisory_unlock($1)`, lockRecording)
}

// TryCollect takes the collection lock if no process holds it; ok is false if one does.
func (s *Store) TryCollect(ctx context.Context) (release func(), ok bool, err error) {
	conn, err := s.locks.Acquire(ctx)
	if err != nil {
		return nil, false, classify(err)
	}
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, int64(lockCollect)).Scan(&ok); err != nil || !ok {
		conn.Release()
		return nil, false, classify(err)
	}
	return unlocker(conn, `SELECT pg_advisory_unlock($1)`, lockCollect), true, nil
}

// advisory holds a session advisory lock on a connection of the lock pool, which
// keeps the lock holders from starving the queries they make meanwhile.
func (s *Store) advisory(ctx context.Context, lock, unlock string, key int64) (func(), error) {
	conn, err := s.locks.Acquire(ctx)
	if err != nil {
		return nil, classify(err)
	}
	if _, err := conn.Exec(ctx, lock, key); err != nil {
		conn.Release()
		return nil, fmt.Errorf("take lock: %w", classify(err))
	}
	return unlocker(conn, unlock, key), nil
}

// unlocker releases a session lock and returns the connection; if the unlock fails the
// connection is closed, which ends the session and so releases the lock all the same.
func unlocker(conn *pgxpool.Conn, unlock string, key int64) func() {
	return func() {
		ctx := context.Background()
		if _, err := conn.Exec(ctx, unlock, key); err != nil {
			conn.Conn().Close(ctx)
		}
		conn.Release()
	}
}
