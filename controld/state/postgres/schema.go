package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// migrations are the schema's versions: migrations[i] takes the schema from version i
// to i+1. Append only; never edit a released one.
var migrations = []string{
	// 1: the first schema.
	`
CREATE TABLE armor_meta (
	id             integer PRIMARY KEY CHECK (id = 1),
	routes_version bigint NOT NULL
);
INSERT INTO armor_meta (id, routes_version) VALUES (1, 1);
CREATE TABLE repositories (
	name        text PRIMARY KEY,
	release_seq bigint NOT NULL DEFAULT 0,
	doc         jsonb NOT NULL
);
CREATE TABLE hostnames (
	hostname   text PRIMARY KEY,
	repository text NOT NULL REFERENCES repositories (name)
);
CREATE TABLE releases (
	repository text NOT NULL REFERENCES repositories (name),
	id         text NOT NULL,
	seq        bigint NOT NULL,
	doc        jsonb NOT NULL,
	PRIMARY KEY (repository, id),
	UNIQUE (repository, seq)
);
CREATE TABLE history (
	repository text NOT NULL REFERENCES repositories (name),
	seq        bigint NOT NULL,
	doc        jsonb NOT NULL,
	PRIMARY KEY (repository, seq)
);
CREATE TABLE deleted_releases (
	repository text NOT NULL REFERENCES repositories (name),
	id         text NOT NULL,
	doc        jsonb NOT NULL,
	PRIMARY KEY (repository, id)
);
CREATE TABLE rolled_back (
	repository text NOT NULL REFERENCES repositories (name),
	release    text NOT NULL,
	doc        jsonb NOT NULL,
	PRIMARY KEY (repository, release)
);
CREATE TABLE tokens (
	name text PRIMARY KEY,
	hash text NOT NULL UNIQUE,
	doc  jsonb NOT NULL
);
`,
	// 2: the objects a store check found gone (state.MissingObjects).
	`
CREATE TABLE missing_objects (
	repository text NOT NULL REFERENCES repositories (name),
	sha256     text NOT NULL,
	doc        jsonb NOT NULL,
	PRIMARY KEY (repository, sha256)
);
`,
	// 3: webhooks and their deliveries (state.Hooks); the event counter.
	`
ALTER TABLE armor_meta ADD COLUMN event_seq bigint NOT NULL DEFAULT 0;
CREATE TABLE hooks (
	id  text PRIMARY KEY,
	doc jsonb NOT NULL
);
CREATE TABLE hook_deliveries (
	id          bigserial PRIMARY KEY,
	hook        text NOT NULL REFERENCES hooks (id) ON DELETE CASCADE,
	state       text NOT NULL,
	created_at  timestamptz NOT NULL,
	next_at     timestamptz NOT NULL,
	lease_by    text,
	lease_until timestamptz,
	lease_token text,
	doc         jsonb NOT NULL
);
CREATE INDEX hook_deliveries_due ON hook_deliveries (next_at, id) WHERE state = 'pending';
CREATE INDEX hook_deliveries_hook ON hook_deliveries (hook, id);
`,
	// 4: the edges' shared certificate storage (state.CertStorage).
	`
CREATE TABLE cert_files (
	key      text PRIMARY KEY COLLATE "C",
	value    bytea NOT NULL,
	modified timestamptz NOT NULL
);
CREATE TABLE cert_locks (
	name   text PRIMARY KEY,
	holder text NOT NULL,
	until  timestamptz NOT NULL
);
`,
}

// SchemaVersion is the newest schema this binary knows.
var SchemaVersion = len(migrations)

// SchemaTooNewError refuses a database written by a newer controld.
type SchemaTooNewError struct {
	Database, Binary int
}

func (e *SchemaTooNewError) Error() string {
	return fmt.Sprintf("the database's schema is version %d, newer than version %d that this controld knows: upgrade controld (or point it at another database)", e.Database, e.Binary)
}

// migrateLock is the advisory lock key that serialises migrations of replicas starting
// at once ("armor" in ASCII).
const migrateLock = 0x61726d6f72

// migrate brings the schema to SchemaVersion in one transaction.
func migrate(ctx context.Context, conn interface {
	Begin(context.Context) (pgx.Tx, error)
}) error {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(migrateLock)); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS armor_schema (
		version    integer PRIMARY KEY,
		applied_at timestamptz NOT NULL DEFAULT now()
	)`); err != nil {
		return err
	}
	var cur int
	if err := tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM armor_schema`).Scan(&cur); err != nil {
		return err
	}
	if cur > SchemaVersion {
		return &SchemaTooNewError{Database: cur, Binary: SchemaVersion}
	}
	for v := cur + 1; v <= SchemaVersion; v++ {
		if _, err := tx.Exec(ctx, migrations[v-1]); err != nil {
			return fmt.Errorf("migrate the schema to version %d: %w", v, err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO armor_schema (version) VALUES ($1)`, v); err != nil {
			return err
		}
	}
	return tx.Commit(ctx)
}
