package bolt

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/armor-apt/armor/controld/state"
)

// Webhooks (state.Hooks). The buckets are made on first use, so a database written
// before them needs no migration:
//
//	hooks            id → JSON state.Hook
//	hookdeliveries   u64 id → JSON state.Delivery (lease included)
//	hookpending      u64 id → nothing: the pending deliveries, the only ones claimed
//	meta/eventseq    the last event's Seq
//
// bbolt is one process's file, so a claim needs no more than the write transaction.
var (
	bHooks      = []byte("hooks")
	bDeliveries = []byte("hookdeliveries")
	bPending    = []byte("hookpending")
	kEventSeq   = []byte("eventseq")
)

func hookBuckets(tx *bbolt.Tx) (hooks, deliveries, pending *bbolt.Bucket, err error) {
	if !tx.Writable() {
		return tx.Bucket(bHooks), tx.Bucket(bDeliveries), tx.Bucket(bPending), nil
	}
	for _, p := range []struct {
		b    **bbolt.Bucket
		name []byte
	}{{&hooks, bHooks}, {&deliveries, bDeliveries}, {&pending, bPending}} {
		if *p.b, err = tx.CreateBucketIfNotExists(p.name); err != nil {
			return nil, nil, nil, err
		}
	}
	return hooks, deliveries, pending, nil
}

// CreateHook implements state.Hooks.
func (s *Store) CreateHook(ctx context.Context, h state.Hook) error {
	return s.update(ctx, func(tx *bbolt.Tx) error {
		hooks, _, _, err := hookBuckets(tx)
		if err != nil {
			return err
		}
		if hooks.Get([]byte(h.ID)) != nil {
			return fmt.Errorf("hook %s: %w", h.ID, state.ErrExists)
		}
		return putJSON(hooks, []byte(h.ID), h)
	})
}

// Hooks implements state.Hooks.
func (s *Store) Hooks(ctx context.Context) (out []state.Hook, err error) {
	err = s.view(ctx, func(tx *bbolt.Tx) error {
		out, err = allHooks(tx)
		return err
	})
	return out, err
}

func allHooks(tx *bbolt.Tx) ([]state.Hook, error) {
	b := tx.Bucket(bHooks)
	if b == nil {
		return nil, nil
	}
	var out []state.Hook
	err := b.ForEach(func(k, v []byte) error {
		var h state.Hook
		if err := json.Unmarshal(v, &h); err != nil {
			return fmt.Errorf("decode hook %q: %w", k, err)
		}
		out = append(out, h)
		return nil
	})
	return out, err
}

// DeleteHook implements state.Hooks.
func (s *Store) DeleteHook(ctx context.Context, id string) (h state.Hook, err error) {
	err = s.update(ctx, func(tx *bbolt.Tx) error {
		hooks, deliveries, pending, err := hookBuckets(tx)
		if err != nil {
			return err
		}
		ok, err := getJSON(hooks, id, &h)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("hook %s: %w", id, state.ErrNotFound)
		}
		var drop [][]byte
		err = deliveries.ForEach(func(k, v []byte) error {
			var d state.Delivery
			if err := json.Unmarshal(v, &d); err != nil {
				return fmt.Errorf("decode delivery %x: %w", k, err)
			}
			if d.Hook == id {
				drop = append(drop, bytes.Clone(k))
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, k := range drop {
			if err := deliveries.Delete(k); err != nil {
				return err
			}
			if err := pending.Delete(k); err != nil {
				return err
			}
		}
		return hooks.Delete([]byte(id))
	})
	return h, err
}

// appendEvent numbers ev and stores its deliveries, inside a write transaction.
func appendEvent(tx *bbolt.Tx, ev state.Event, at time.Time) (state.Event, int, error) {
	meta := tx.Bucket(bMeta)
	var seq uint64
	if v := meta.Get(kEventSeq); v != nil {
		seq = binary.BigEndian.Uint64(v)
	}
	ev.Seq = seq + 1
	if err := meta.Put(kEventSeq, u64(ev.Seq)); err != nil {
		return ev, 0, err
	}
	hooks, err := allHooks(tx)
	if err != nil {
		return ev, 0, err
	}
	ds := state.Fanout(ev, hooks, at)
	if len(ds) == 0 {
		return ev, 0, nil
	}
	_, deliveries, pending, err := hookBuckets(tx)
	if err != nil {
		return ev, 0, err
	}
	for _, d := range ds {
		if d.ID, err = deliveries.NextSequence(); err != nil {
			return ev, 0, err
		}
		if err := putJSON(deliveries, u64(d.ID), d); err != nil {
			return ev, 0, err
		}
		if err := pending.Put(u64(d.ID), nil); err != nil {
			return ev, 0, err
		}
	}
	return ev, len(ds), nil
}

// AppendEvent implements state.Hooks.
func (s *Store) AppendEvent(ctx context.Context, ev state.Event, at time.Time) (out state.Event, n int, err error) {
	err = s.update(ctx, func(tx *bbolt.Tx) error {
		out, n, err = appendEvent(tx, ev, at)
		return err
	})
	return out, n, err
}

func getDelivery(b *bbolt.Bucket, id uint64) (d state.Delivery, ok bool, err error) {
	v := b.Get(u64(id))
	if v == nil {
		return d, false, nil
	}
	if err := json.Unmarshal(v, &d); err != nil {
		return d, false, fmt.Errorf("decode delivery %d: %w", id, err)
	}
	return d, true, nil
}

// ClaimDeliveries implements state.Hooks.
func (s *Store) ClaimDeliveries(ctx context.Context, c state.Claim) (out []state.Delivery, err error) {
	err = s.update(ctx, func(tx *bbolt.Tx) error {
		out = nil
		_, deliveries, pending, err := hookBuckets(tx)
		if err != nil {
			return err
		}
		var due []state.Delivery
		err = pending.ForEach(func(k, _ []byte) error {
			d, ok, err := getDelivery(deliveries, binary.BigEndian.Uint64(k))
			if err == nil && ok && d.Due(c.Now) {
				due = append(due, d)
			}
			return err
		})
		if err != nil {
			return err
		}
		slices.SortFunc(due, func(a, b state.Delivery) int {
			if c := a.NextAt.Compare(b.NextAt); c != 0 {
				return c
			}
			return cmp.Compare(a.ID, b.ID)
		})
		token, err := leaseToken()
		if err != nil {
			return err
		}
		for _, d := range due[:min(len(due), max(c.Limit, 1))] {
			d.Lease = &state.Lease{By: c.By, Until: c.Now.Add(c.Lease), Token: token}
			if err := putJSON(deliveries, u64(d.ID), d); err != nil {
				return err
			}
			out = append(out, d)
		}
		return nil
	})
	return out, err
}

// leaseToken returns a fresh random lease token.
func leaseToken() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("lease token: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// FinishDelivery implements state.Hooks.
func (s *Store) FinishDelivery(ctx context.Context, id uint64, token string, a state.Attempt, retry time.Time) (d state.Delivery, err error) {
	err = s.update(ctx, func(tx *bbolt.Tx) error {
		_, deliveries, pending, err := hookBuckets(tx)
		if err != nil {
			return err
		}
		var ok bool
		d, ok, err = getDelivery(deliveries, id)
		switch {
		case err != nil:
			return err
		case !ok:
			return fmt.Errorf("delivery %d: %w", id, state.ErrNotFound)
		case d.Lease == nil || d.Lease.Token != token:
			return fmt.Errorf("delivery %d: the lease ended and another claim holds it: %w", id, state.ErrConflict)
		}
		d = d.Finish(a, retry)
		if d.State != state.DeliveryPending {
			if err := pending.Delete(u64(id)); err != nil {
				return err
			}
		}
		return putJSON(deliveries, u64(id), d)
	})
	return d, err
}

// Deliveries implements state.Hooks.
func (s *Store) Deliveries(ctx context.Context, q state.DeliveryQuery) (out []state.Delivery, err error) {
	limit := q.Limit
	if limit <= 0 {
		limit = 100
	}
	err = s.view(ctx, func(tx *bbolt.Tx) error {
		b := tx.Bucket(bDeliveries)
		if b == nil {
			return nil
		}
		c := b.Cursor()
		for k, v := c.Last(); k != nil && len(out) < limit; k, v = c.Prev() {
			var d state.Delivery
			if err := json.Unmarshal(v, &d); err != nil {
				return fmt.Errorf("decode delivery %x: %w", k, err)
			}
			if q.Hook == "" || d.Hook == q.Hook {
				out = append(out, d)
			}
		}
		return nil
	})
	return out, err
}

// Delivery implements state.Hooks.
func (s *Store) Delivery(ctx context.Context, id uint64) (d state.Delivery, err error) {
	err = s.view(ctx, func(tx *bbolt.Tx) error {
		b := tx.Bucket(bDeliveries)
		ok := false
		if b != nil {
			if d, ok, err = getDelivery(b, id); err != nil {
				return err
			}
		}
		if !ok {
			return fmt.Errorf("delivery %d: %w", id, state.ErrNotFound)
		}
		return nil
	})
	return d, err
}

// Redeliver implements state.Hooks.
func (s *Store) Redeliver(ctx context.Context, id uint64, at time.Time) (d state.Delivery, err error) {
	err = s.update(ctx, func(tx *bbolt.Tx) error {
		_, deliveries, pending, err := hookBuckets(tx)
		if err != nil {
			return err
		}
		var ok bool
		d, ok, err = getDelivery(deliveries, id)
		switch {
		case err != nil:
			return err
		case !ok:
			return fmt.Errorf("delivery %d: %w", id, state.ErrNotFound)
		case d.State == state.DeliveryPending:
			return nil
		}
		d.State, d.NextAt, d.Lease = state.DeliveryPending, at, nil
		if err := pending.Put(u64(id), nil); err != nil {
			return err
		}
		return putJSON(deliveries, u64(id), d)
	})
	return d, err
}

// PruneDeliveries implements state.Hooks.
func (s *Store) PruneDeliveries(ctx context.Context, before time.Time) (n int, err error) {
	err = s.update(ctx, func(tx *bbolt.Tx) error {
		n = 0
		_, deliveries, _, err := hookBuckets(tx)
		if err != nil {
			return err
		}
		var drop [][]byte
		err = deliveries.ForEach(func(k, v []byte) error {
			var d state.Delivery
			if err := json.Unmarshal(v, &d); err != nil {
				return fmt.Errorf("decode delivery %x: %w", k, err)
			}
			if d.State != state.DeliveryPending && d.CreatedAt.Before(before) {
				drop = append(drop, bytes.Clone(k))
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, k := range drop {
			if err := deliveries.Delete(k); err != nil {
				return err
			}
		}
		n = len(drop)
		return nil
	})
	return n, err
}
