package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/armor-apt/armor/controld/state"
)

// Webhooks (state.Hooks). A delivery's state, due time and lease live in columns, the
// rest (its event, its attempts) in doc. Replicas claim deliveries with FOR UPDATE SKIP
// LOCKED, outside the global write lock: a claim never waits for a push, and two
// replicas never lease the same delivery.

// CreateHook implements state.Hooks.
func (s *Store) CreateHook(ctx context.Context, h state.Hook) error {
	return s.write(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `INSERT INTO hooks (id, doc) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING`, h.ID, encode(h))
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("hook %s: %w", h.ID, state.ErrExists)
		}
		return nil
	})
}

// Hooks implements state.Hooks.
func (s *Store) Hooks(ctx context.Context) (out []state.Hook, err error) {
	err = s.read(ctx, func(tx pgx.Tx) error {
		out, err = allHooks(ctx, tx)
		return err
	})
	return out, err
}

func allHooks(ctx context.Context, tx pgx.Tx) ([]state.Hook, error) {
	rows, err := tx.Query(ctx, `SELECT id, doc FROM hooks ORDER BY id COLLATE "C"`)
	if err != nil {
		return nil, err
	}
	var out []state.Hook
	var id string
	var doc []byte
	_, err = pgx.ForEachRow(rows, []any{&id, &doc}, func() error {
		var h state.Hook
		if err := decode(doc, &h, "hook "+id); err != nil {
			return err
		}
		out = append(out, h)
		return nil
	})
	return out, err
}

// DeleteHook implements state.Hooks; its deliveries go with it (ON DELETE CASCADE).
func (s *Store) DeleteHook(ctx context.Context, id string) (h state.Hook, err error) {
	err = s.write(ctx, func(tx pgx.Tx) error {
		var doc []byte
		err := tx.QueryRow(ctx, `DELETE FROM hooks WHERE id = $1 RETURNING doc`, id).Scan(&doc)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("hook %s: %w", id, state.ErrNotFound)
		}
		if err != nil {
			return err
		}
		return decode(doc, &h, "hook "+id)
	})
	return h, err
}

// appendEvent numbers ev and stores its deliveries, inside a write transaction (which
// holds the global lock, so event numbers follow commit order).
func appendEvent(ctx context.Context, tx pgx.Tx, ev state.Event, at time.Time) (state.Event, int, error) {
	var seq int64
	if err := tx.QueryRow(ctx, `UPDATE armor_meta SET event_seq = event_seq + 1 WHERE id = 1 RETURNING event_seq`).Scan(&seq); err != nil {
		return ev, 0, err
	}
	ev.Seq = uint64(seq)
	hooks, err := allHooks(ctx, tx)
	if err != nil {
		return ev, 0, err
	}
	ds := state.Fanout(ev, hooks, at)
	for _, d := range ds {
		if _, err := tx.Exec(ctx, `INSERT INTO hook_deliveries (hook, state, created_at, next_at, doc) VALUES ($1, $2, $3, $4, $5)`,
			d.Hook, d.State, d.CreatedAt, d.NextAt, encode(d)); err != nil {
			return ev, 0, err
		}
	}
	return ev, len(ds), nil
}

// AppendEvent implements state.Hooks.
func (s *Store) AppendEvent(ctx context.Context, ev state.Event, at time.Time) (out state.Event, n int, err error) {
	err = s.write(ctx, func(tx pgx.Tx) error {
		out, n, err = appendEvent(ctx, tx, ev, at)
		return err
	})
	return out, n, err
}

// deliveryColumns are what scanDelivery reads.
const deliveryColumns = `id, state, next_at, lease_by, lease_until, lease_token, doc`

// scanDelivery reads a row of deliveryColumns. next_at, to the microsecond, is for the
// index; doc keeps it whole.
func scanDelivery(row pgx.Row) (state.Delivery, error) {
	var d state.Delivery
	var id int64
	var st string
	var next time.Time
	var by, token *string
	var until *time.Time
	var doc []byte
	if err := row.Scan(&id, &st, &next, &by, &until, &token, &doc); err != nil {
		return d, err
	}
	if err := decode(doc, &d, fmt.Sprintf("delivery %d", id)); err != nil {
		return d, err
	}
	d.ID, d.State, d.Lease = uint64(id), st, nil
	if token != nil && by != nil && until != nil {
		d.Lease = &state.Lease{By: *by, Until: until.UTC(), Token: *token}
	}
	return d, nil
}

func collectDeliveries(rows pgx.Rows) ([]state.Delivery, error) {
	defer rows.Close()
	var out []state.Delivery
	for rows.Next() {
		d, err := scanDelivery(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, rows.Err()
}

// ClaimDeliveries implements state.Hooks.
func (s *Store) ClaimDeliveries(ctx context.Context, c state.Claim) (out []state.Delivery, err error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("lease token: %w", err)
	}
	token := hex.EncodeToString(b)
	err = classify(pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `UPDATE hook_deliveries d SET lease_by = $3, lease_until = $2, lease_token = $4
			FROM (SELECT id FROM hook_deliveries
				WHERE state = 'pending' AND next_at <= $1 AND (lease_until IS NULL OR lease_until <= $1)
				ORDER BY next_at, id LIMIT $5 FOR UPDATE SKIP LOCKED) due
			WHERE d.id = due.id
			RETURNING d.id, d.state, d.next_at, d.lease_by, d.lease_until, d.lease_token, d.doc`,
			c.Now, c.Now.Add(c.Lease), c.By, token, max(c.Limit, 1))
		if err != nil {
			return err
		}
		out, err = collectDeliveries(rows)
		return err
	}))
	return out, err
}

// FinishDelivery implements state.Hooks.
func (s *Store) FinishDelivery(ctx context.Context, id uint64, token string, a state.Attempt, retry time.Time) (d state.Delivery, err error) {
	err = classify(pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		d, err = scanDelivery(tx.QueryRow(ctx, `SELECT `+deliveryColumns+` FROM hook_deliveries WHERE id = $1 FOR UPDATE`, int64(id)))
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return fmt.Errorf("delivery %d: %w", id, state.ErrNotFound)
		case err != nil:
			return err
		case d.Lease == nil || d.Lease.Token != token:
			return fmt.Errorf("delivery %d: the lease ended and another claim holds it: %w", id, state.ErrConflict)
		}
		d = d.Finish(a, retry)
		return saveDelivery(ctx, tx, d)
	}))
	return d, err
}

// saveDelivery writes d's columns and document, without a lease.
func saveDelivery(ctx context.Context, tx pgx.Tx, d state.Delivery) error {
	doc := d
	doc.Lease = nil
	_, err := tx.Exec(ctx, `UPDATE hook_deliveries SET state = $2, next_at = $3, lease_by = NULL, lease_until = NULL,
		lease_token = NULL, doc = $4 WHERE id = $1`, int64(d.ID), d.State, d.NextAt, encode(doc))
	return err
}

// Deliveries implements state.Hooks.
func (s *Store) Deliveries(ctx context.Context, q state.DeliveryQuery) (out []state.Delivery, err error) {
	limit := q.Limit
	if limit <= 0 {
		limit = 100
	}
	err = s.read(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT `+deliveryColumns+` FROM hook_deliveries
			WHERE $1 = '' OR hook = $1 ORDER BY id DESC LIMIT $2`, q.Hook, limit)
		if err != nil {
			return err
		}
		out, err = collectDeliveries(rows)
		return err
	})
	return out, err
}

// Delivery implements state.Hooks.
func (s *Store) Delivery(ctx context.Context, id uint64) (d state.Delivery, err error) {
	err = s.read(ctx, func(tx pgx.Tx) error {
		d, err = scanDelivery(tx.QueryRow(ctx, `SELECT `+deliveryColumns+` FROM hook_deliveries WHERE id = $1`, int64(id)))
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("delivery %d: %w", id, state.ErrNotFound)
		}
		return err
	})
	return d, err
}

// Redeliver implements state.Hooks.
func (s *Store) Redeliver(ctx context.Context, id uint64, at time.Time) (d state.Delivery, err error) {
	err = classify(pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		d, err = scanDelivery(tx.QueryRow(ctx, `SELECT `+deliveryColumns+` FROM hook_deliveries WHERE id = $1 FOR UPDATE`, int64(id)))
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return fmt.Errorf("delivery %d: %w", id, state.ErrNotFound)
		case err != nil:
			return err
		case d.State == state.DeliveryPending:
			return nil
		}
		d.State, d.NextAt, d.Lease = state.DeliveryPending, at, nil
		return saveDelivery(ctx, tx, d)
	}))
	return d, err
}

// PruneDeliveries implements state.Hooks.
func (s *Store) PruneDeliveries(ctx context.Context, before time.Time) (int, error) {
	var tag pgconn.CommandTag
	err := classify(pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		tag, err = tx.Exec(ctx, `DELETE FROM hook_deliveries WHERE state <> 'pending' AND created_at < $1`, before)
		return err
	}))
	return int(tag.RowsAffected()), err
}
