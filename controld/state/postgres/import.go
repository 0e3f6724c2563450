package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/armor-apt/armor/controld/state"
)

// Contents is everything a state store holds, as the state.Store interface reads it: what
// a migration from another store copies.
type Contents struct {
	Version      uint64
	Repositories []RepositoryContents
	Tokens       []state.Token
	Hooks        []state.Hook
	// Deliveries are the hooks' deliveries, pending ones and the log, newest first.
	Deliveries []state.Delivery
	// CertFiles are the edges' shared certificate storage (locks are not copied: no
	// edge of the old store holds one any more).
	CertFiles []state.CertFile
}

// allDeliveries is more deliveries than any store keeps: ReadContents reads them all.
const allDeliveries = 1 << 40

// RepositoryContents is one repository with its records.
type RepositoryContents struct {
	state.Repository
	Releases   []state.Release    // in recording order
	History    []state.Activation // oldest first
	Deleted    []state.Deleted
	RolledBack []state.RolledBack
	Missing    []state.MissingObject
}

// ReadContents reads every record of st. Run it on a store no one writes meanwhile.
func ReadContents(ctx context.Context, st state.Store) (Contents, error) {
	snap, err := st.Snapshot(ctx)
	if err != nil {
		return Contents{}, fmt.Errorf("read repositories: %w", err)
	}
	c := Contents{Version: snap.Version}
	for _, r := range snap.Repositories {
		rc := RepositoryContents{Repository: r}
		if rc.Releases, err = st.Releases(ctx, r.Name); err != nil {
			return Contents{}, fmt.Errorf("repository %s: releases: %w", r.Name, err)
		}
		if rc.History, err = st.History(ctx, r.Name); err != nil {
			return Contents{}, fmt.Errorf("repository %s: history: %w", r.Name, err)
		}
		if rc.Deleted, err = st.DeletedReleases(ctx, r.Name); err != nil {
			return Contents{}, fmt.Errorf("repository %s: deleted releases: %w", r.Name, err)
		}
		if rc.RolledBack, err = st.RolledBack(ctx, r.Name); err != nil {
			return Contents{}, fmt.Errorf("repository %s: rolled-back releases: %w", r.Name, err)
		}
		if rc.Missing, err = st.Missing(ctx, r.Name); err != nil {
			return Contents{}, fmt.Errorf("repository %s: missing objects: %w", r.Name, err)
		}
		c.Repositories = append(c.Repositories, rc)
	}
	if c.Tokens, err = st.Tokens(ctx); err != nil {
		return Contents{}, fmt.Errorf("read tokens: %w", err)
	}
	if c.Hooks, err = st.Hooks(ctx); err != nil {
		return Contents{}, fmt.Errorf("read hooks: %w", err)
	}
	if c.Deliveries, err = st.Deliveries(ctx, state.DeliveryQuery{Limit: allDeliveries}); err != nil {
		return Contents{}, fmt.Errorf("read hook deliveries: %w", err)
	}
	infos, err := st.CertFiles(ctx, "")
	if err != nil {
		return Contents{}, fmt.Errorf("read certificate storage: %w", err)
	}
	for _, i := range infos {
		f, err := st.CertFile(ctx, i.Key)
		if err != nil {
			return Contents{}, fmt.Errorf("read certificate storage: %w", err)
		}
		c.CertFiles = append(c.CertFiles, f)
	}
	return c, nil
}

// ErrNotEmpty: Import was asked to write into a database that holds state already.
var ErrNotEmpty = errors.New("the database already holds controld state")

// Import writes c, record for record (sequence numbers, active pointers, marks and
// all), into the store in one transaction. The store must hold no repository and no
// token (ErrNotEmpty); the routes version becomes c's, so edges that polled the old
// store see the same routes under the same version.
func (s *Store) Import(ctx context.Context, c Contents) error {
	return s.write(ctx, func(tx pgx.Tx) error {
		var repos, tokens int
		if err := tx.QueryRow(ctx, `SELECT (SELECT count(*) FROM repositories), (SELECT count(*) FROM tokens)`).Scan(&repos, &tokens); err != nil {
			return err
		}
		if repos > 0 || tokens > 0 {
			return fmt.Errorf("%w (%d repositories, %d tokens): migrate into an empty database", ErrNotEmpty, repos, tokens)
		}
		for _, rc := range c.Repositories {
			if err := importRepository(ctx, tx, rc); err != nil {
				return fmt.Errorf("repository %s: %w", rc.Name, err)
			}
		}
		for _, t := range c.Tokens {
			if _, err := tx.Exec(ctx, `INSERT INTO tokens (name, hash, doc) VALUES ($1, $2, $3)`, t.Name, t.Hash, encode(t)); err != nil {
				return fmt.Errorf("token %s: %w", t.Name, err)
			}
		}
		if err := importHooks(ctx, tx, c); err != nil {
			return err
		}
		for _, f := range c.CertFiles {
			if _, err := tx.Exec(ctx, `INSERT INTO cert_files (key, value, modified) VALUES ($1, $2, $3)`, f.Key, f.Value, f.Modified); err != nil {
				return fmt.Errorf("certificate storage key %s: %w", f.Key, err)
			}
		}
		_, err := tx.Exec(ctx, `UPDATE armor_meta SET routes_version = greatest(routes_version, $1) WHERE id = 1`, int64(c.Version))
		return err
	})
}

// importHooks writes the hooks and their deliveries under their own ids (leases
// dropped: no process of the old store delivers any more), and carries the event and
// delivery counters on.
func importHooks(ctx context.Context, tx pgx.Tx, c Contents) error {
	for _, h := range c.Hooks {
		if _, err := tx.Exec(ctx, `INSERT INTO hooks (id, doc) VALUES ($1, $2)`, h.ID, encode(h)); err != nil {
			return fmt.Errorf("hook %s: %w", h.ID, err)
		}
	}
	var lastEvent, lastDelivery uint64
	for _, d := range c.Deliveries {
		d.Lease = nil
		if _, err := tx.Exec(ctx, `INSERT INTO hook_deliveries (id, hook, state, created_at, next_at, doc) VALUES ($1, $2, $3, $4, $5, $6)`,
			int64(d.ID), d.Hook, d.State, d.CreatedAt, d.NextAt, encode(d)); err != nil {
			return fmt.Errorf("hook delivery %d: %w", d.ID, err)
		}
		lastEvent, lastDelivery = max(lastEvent, d.Event.Seq), max(lastDelivery, d.ID)
	}
	if lastDelivery > 0 {
		if _, err := tx.Exec(ctx, `SELECT setval(pg_get_serial_sequence('hook_deliveries', 'id'), $1)`, int64(lastDelivery)); err != nil {
			return err
		}
	}
	_, err := tx.Exec(ctx, `UPDATE armor_meta SET event_seq = greatest(event_seq, $1) WHERE id = 1`, int64(lastEvent))
	return err
}

func importRepository(ctx context.Context, tx pgx.Tx, rc RepositoryContents) error {
	seq := uint64(0)
	for _, rel := range rc.Releases {
		seq = max(seq, rel.Seq)
	}
	for _, d := range rc.Deleted {
		seq = max(seq, d.Release.Seq)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO repositories (name, release_seq, doc) VALUES ($1, $2, $3)`,
		rc.Name, int64(seq), encode(rc.Repository)); err != nil {
		return err
	}
	for _, h := range rc.Hostnames {
		if _, err := tx.Exec(ctx, `INSERT INTO hostnames (hostname, repository) VALUES ($1, $2)`, h, rc.Name); err != nil {
			return fmt.Errorf("hostname %s: %w", h, err)
		}
	}
	for _, rel := range rc.Releases {
		if _, err := tx.Exec(ctx, `INSERT INTO releases (repository, id, seq, doc) VALUES ($1, $2, $3, $4)`,
			rc.Name, rel.ID, int64(rel.Seq), encode(rel)); err != nil {
			return fmt.Errorf("release %s: %w", rel.ID, err)
		}
	}
	for _, a := range rc.History {
		if _, err := tx.Exec(ctx, `INSERT INTO history (repository, seq, doc) VALUES ($1, $2, $3)`,
			rc.Name, int64(a.Seq), encode(a)); err != nil {
			return fmt.Errorf("history entry %d: %w", a.Seq, err)
		}
	}
	for _, d := range rc.Deleted {
		if _, err := tx.Exec(ctx, `INSERT INTO deleted_releases (repository, id, doc) VALUES ($1, $2, $3)`,
			rc.Name, d.Release.ID, encode(d)); err != nil {
			return fmt.Errorf("deleted release %s: %w", d.Release.ID, err)
		}
	}
	for _, m := range rc.RolledBack {
		if _, err := tx.Exec(ctx, `INSERT INTO rolled_back (repository, release, doc) VALUES ($1, $2, $3)`,
			rc.Name, m.Release, encode(m)); err != nil {
			return fmt.Errorf("rolled-back mark of %s: %w", m.Release, err)
		}
	}
	for _, o := range rc.Missing {
		if _, err := tx.Exec(ctx, `INSERT INTO missing_objects (repository, sha256, doc) VALUES ($1, $2, $3)`,
			rc.Name, o.SHA256, encode(o)); err != nil {
			return fmt.Errorf("missing object %s: %w", o.SHA256, err)
		}
	}
	return nil
}
