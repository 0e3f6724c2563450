// Package postgres implements state.Store on PostgreSQL (pgx), so that several controld
// replicas can share one state.
//
// Each method is one transaction. Every writing transaction first locks the one row of
// armor_meta, which holds the routes version: writers are serialised across all replicas,
// as bbolt serialises them in one process, so a compare-and-swap on an active pointer is
// one transaction that no other write interleaves with. Reads run in repeatable-read
// snapshots. A transaction that bumps the routes version sends NOTIFY armor_routes with
// the new version on commit; Watch delivers those to a replica's routes long polls.
//
// Records are JSON documents (the state package's types) beside the columns that
// constraints and lookups need. The schema is versioned (armor_schema) and migrated when
// the store opens; a database whose schema is newer than this binary's is refused.
// Connection failures are state.ErrUnavailable.
package postgres
