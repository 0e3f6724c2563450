package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/armor-apt/armor/controld/state"
)

var _ state.Store = (*Store)(nil)

// channel is the NOTIFY channel of routes version changes; the payload is the version.
const channel = "armor_routes"

// connectTimeout bounds each connection attempt when the URL sets no connect_timeout.
const connectTimeout = 10 * time.Second

// Store is the PostgreSQL state store.
type Store struct {
	pool  *pgxpool.Pool
	locks *pgxpool.Pool   // connections holding advisory locks (locks.go)
	cfg   *pgx.ConnConfig // for Watch's own connection
	where string          // host:port/database, for messages (never the password)
}

// IsURL reports whether s names a PostgreSQL database (postgres:// or postgresql://).
func IsURL(s string) bool {
	return strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://")
}

// Open connects to the database at url (a postgres:// URL; the password may come from
// PGPASSWORD or ~/.pgpass instead of the URL), checks that it answers, and migrates its
// schema to this binary's version. A database that cannot be reached is an error
// wrapping state.ErrUnavailable; one whose schema is newer is a *SchemaTooNewError.
func Open(ctx context.Context, url string) (*Store, error) {
	pc, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("state database: %w", redact(err))
	}
	if pc.ConnConfig.ConnectTimeout == 0 {
		pc.ConnConfig.ConnectTimeout = connectTimeout
	}
	s := &Store{cfg: pc.ConnConfig.Copy(), where: fmt.Sprintf("%s:%d/%s", pc.ConnConfig.Host, pc.ConnConfig.Port, pc.ConnConfig.Database)}
	s.pool, err = pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("state database %s: %w", s.where, redact(err))
	}
	lc := pc.Copy()
	lc.MaxConns = max(lc.MaxConns, 16)
	lc.MinConns = 0
	if s.locks, err = pgxpool.NewWithConfig(ctx, lc); err != nil {
		s.pool.Close()
		return nil, fmt.Errorf("state database %s: %w", s.where, redact(err))
	}
	if err := s.pool.Ping(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("state database %s is unreachable: %w", s.where, classify(err))
	}
	if err := migrate(ctx, s.pool); err != nil {
		s.Close()
		return nil, fmt.Errorf("state database %s: %w", s.where, classify(err))
	}
	return s, nil
}

// redact drops the URL (and any password in it) from a pgx parse error.
func redact(err error) error {
	var pe *pgconn.ParseConfigError
	if errors.As(err, &pe) {
		return fmt.Errorf("invalid database URL: %s", pe.Unwrap())
	}
	return err
}

// Close closes the connections.
func (s *Store) Close() error {
	s.pool.Close()
	s.locks.Close()
	return nil
}

// String names the database without credentials.
func (s *Store) String() string { return "postgres " + s.where }

// Check runs state.Verify.
func (s *Store) Check(ctx context.Context) error { return state.Verify(ctx, s) }

// classify marks connection failures as state.ErrUnavailable. The contract's own errors
// and SQL errors that are not about the connection pass unchanged.
func classify(err error) error {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	for _, sentinel := range []error{state.ErrNotFound, state.ErrExists, state.ErrConflict, state.ErrHostnameTaken,
		state.ErrUnknownParent, state.ErrNoPrevious, state.ErrKept, state.ErrRolledBack, state.ErrUnavailable} {
		if errors.Is(err, sentinel) {
			return err
		}
	}
	var schema *SchemaTooNewError
	var decode *decodeError
	var scan pgx.ScanArgError
	if errors.As(err, &schema) || errors.As(err, &decode) || errors.As(err, &scan) {
		return err
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case strings.HasPrefix(pe.Code, "08"), // connection exception
			pe.Code == "57P01", pe.Code == "57P02", pe.Code == "57P03", // shutting down, starting
			pe.Code == "53300": // too many connections
		default:
			return err
		}
	}
	return fmt.Errorf("%w: %w", state.ErrUnavailable, err)
}

// decodeError is a stored document that does not decode.
type decodeError struct {
	what string
	err  error
}

func (e *decodeError) Error() string { return fmt.Sprintf("decode %s: %v", e.what, e.err) }
func (e *decodeError) Unwrap() error { return e.err }

func decode(data []byte, v any, what string) error {
	if err := json.Unmarshal(data, v); err != nil {
		return &decodeError{what: what, err: err}
	}
	return nil
}

func encode(v any) []byte {
	data, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("encode %T: %v", v, err)) // the state types always encode
	}
	return data
}

// read runs fn in a read-only repeatable-read transaction.
func (s *Store) read(ctx context.Context, fn func(tx pgx.Tx) error) error {
	return classify(pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, fn))
}

// write runs fn in a transaction that holds the global write lock (the armor_meta row)
// from its first statement, so each statement of fn sees every write committed before.
func (s *Store) write(ctx context.Context, fn func(tx pgx.Tx) error) error {
	return classify(pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT 1 FROM armor_meta WHERE id = 1 FOR UPDATE`); err != nil {
			return err
		}
		return fn(tx)
	}))
}

func bumpVersion(ctx context.Context, tx pgx.Tx) (uint64, error) {
	var v int64
	if err := tx.QueryRow(ctx, `UPDATE armor_meta SET routes_version = routes_version + 1 WHERE id = 1 RETURNING routes_version`).Scan(&v); err != nil {
		return 0, err
	}
	if _, err := tx.Exec(ctx, `SELECT pg_notify($1, $2)`, channel, strconv.FormatInt(v, 10)); err != nil {
		return 0, err
	}
	return uint64(v), nil
}

func version(ctx context.Context, tx pgx.Tx) (uint64, error) {
	var v int64
	err := tx.QueryRow(ctx, `SELECT routes_version FROM armor_meta WHERE id = 1`).Scan(&v)
	return uint64(v), err
}

func getRepo(ctx context.Context, tx pgx.Tx, name string) (state.Repository, error) {
	var r state.Repository
	var doc []byte
	err := tx.QueryRow(ctx, `SELECT doc FROM repositories WHERE name = $1`, name).Scan(&doc)
	if errors.Is(err, pgx.ErrNoRows) {
		return r, fmt.Errorf("repository %s: %w", name, state.ErrNotFound)
	}
	if err != nil {
		return r, err
	}
	return r, decode(doc, &r, "repository "+name)
}

func putRepo(ctx context.Context, tx pgx.Tx, r state.Repository) error {
	_, err := tx.Exec(ctx, `INSERT INTO repositories (name, doc) VALUES ($1, $2)
		ON CONFLICT (name) DO UPDATE SET doc = EXCLUDED.doc`, r.Name, encode(r))
	return err
}

// CreateRepository implements state.Store.
func (s *Store) CreateRepository(ctx context.Context, r state.Repository) error {
	return s.write(ctx, func(tx pgx.Tx) error {
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM repositories WHERE name = $1)`, r.Name).Scan(&exists); err != nil {
			return err
		}
		if exists {
			return fmt.Errorf("repository %s: %w", r.Name, state.ErrExists)
		}
		hosts := r.Hostnames
		r.Hostnames, r.Active, r.Retired = nil, nil, nil
		if err := putRepo(ctx, tx, r); err != nil {
			return err
		}
		if _, err := claimHosts(ctx, tx, &r, hosts); err != nil {
			return err
		}
		if err := putRepo(ctx, tx, r); err != nil {
			return err
		}
		_, err := bumpVersion(ctx, tx)
		return err
	})
}

// claimHosts adds hosts to r (and the hostnames table), reporting whether any was new.
func claimHosts(ctx context.Context, tx pgx.Tx, r *state.Repository, hosts []string) (bool, error) {
	added := false
	for _, h := range hosts {
		var owner string
		err := tx.QueryRow(ctx, `SELECT repository FROM hostnames WHERE hostname = $1`, h).Scan(&owner)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			if _, err := tx.Exec(ctx, `INSERT INTO hostnames (hostname, repository) VALUES ($1, $2)`, h, r.Name); err != nil {
				return false, err
			}
			r.Hostnames = append(r.Hostnames, h)
			added = true
		case err != nil:
			return false, err
		case owner != r.Name:
			return false, &state.HostnameTakenError{Hostname: h, Owner: owner}
		case !slices.Contains(r.Hostnames, h):
			r.Hostnames = append(r.Hostnames, h)
		}
	}
	slices.Sort(r.Hostnames)
	r.Hostnames = slices.Compact(r.Hostnames)
	return added, nil
}

// Repository implements state.Store.
func (s *Store) Repository(ctx context.Context, name string) (r state.Repository, err error) {
	err = s.read(ctx, func(tx pgx.Tx) error {
		r, err = getRepo(ctx, tx, name)
		return err
	})
	return r, err
}

// Repositories implements state.Store.
func (s *Store) Repositories(ctx context.Context) (out []state.Repository, err error) {
	err = s.read(ctx, func(tx pgx.Tx) error {
		out, err = allRepos(ctx, tx)
		return err
	})
	return out, err
}

func allRepos(ctx context.Context, tx pgx.Tx) ([]state.Repository, error) {
	rows, err := tx.Query(ctx, `SELECT name, doc FROM repositories ORDER BY name COLLATE "C"`)
	if err != nil {
		return nil, err
	}
	var out []state.Repository
	var name string
	var doc []byte
	_, err = pgx.ForEachRow(rows, []any{&name, &doc}, func() error {
		var r state.Repository
		if err := decode(doc, &r, "repository "+name); err != nil {
			return err
		}
		out = append(out, r)
		return nil
	})
	return out, err
}

// modifyRepo runs fn on a repository in one write and stores the result; fn reports
// whether the routes version must grow.
func (s *Store) modifyRepo(ctx context.Context, name string, fn func(tx pgx.Tx, r *state.Repository) (bool, error)) (r state.Repository, err error) {
	err = s.write(ctx, func(tx pgx.Tx) error {
		r, err = getRepo(ctx, tx, name)
		if err != nil {
			return err
		}
		bump, err := fn(tx, &r)
		if err != nil {
			return err
		}
		if err := putRepo(ctx, tx, r); err != nil {
			return err
		}
		if bump {
			_, err = bumpVersion(ctx, tx)
		}
		return err
	})
	return r, err
}

// AddHostnames implements state.Store.
func (s *Store) AddHostnames(ctx context.Context, repo string, hostnames []string) (state.Repository, error) {
	return s.modifyRepo(ctx, repo, func(tx pgx.Tx, r *state.Repository) (bool, error) {
		return claimHosts(ctx, tx, r, hostnames)
	})
}

// AddKey implements state.Store.
func (s *Store) AddKey(ctx context.Context, repo string, key state.Key) (state.Repository, error) {
	return s.changeKeys(ctx, repo, func(r *state.Repository) (state.Event, error) {
		r.Keys = slices.DeleteFunc(r.Keys, func(k state.Key) bool { return k.Fingerprint == key.Fingerprint })
		r.Keys = append(r.Keys, key)
		return state.KeyEvent(repo, state.KeyAdded, key, key.AddedBy, key.AddedAt), nil
	})
}

// RemoveKey implements state.Store.
func (s *Store) RemoveKey(ctx context.Context, repo, fingerprint, by string, at time.Time) (state.Repository, error) {
	return s.changeKeys(ctx, repo, func(r *state.Repository) (state.Event, error) {
		i := slices.IndexFunc(r.Keys, func(k state.Key) bool { return strings.EqualFold(k.Fingerprint, fingerprint) })
		if i < 0 {
			return state.Event{}, fmt.Errorf("repository %s: key %s: %w", repo, fingerprint, state.ErrNotFound)
		}
		gone := r.Keys[i]
		r.Keys = slices.Delete(r.Keys, i, i+1)
		return state.KeyEvent(repo, state.KeyRemoved, gone, by, at), nil
	})
}

// changeKeys runs fn on a repository's keys in one write: the routes version grows
// (edges serve the keys) and fn's event is appended.
func (s *Store) changeKeys(ctx context.Context, name string, fn func(r *state.Repository) (state.Event, error)) (r state.Repository, err error) {
	err = s.write(ctx, func(tx pgx.Tx) error {
		if r, err = getRepo(ctx, tx, name); err != nil {
			return err
		}
		ev, err := fn(&r)
		if err != nil {
			return err
		}
		if err := putRepo(ctx, tx, r); err != nil {
			return err
		}
		if ev.RoutesVersion, err = bumpVersion(ctx, tx); err != nil {
			return err
		}
		_, _, err = appendEvent(ctx, tx, ev, ev.At)
		return err
	})
	return r, err
}

// SetRetention implements state.Store.
func (s *Store) SetRetention(ctx context.Context, repo string, d time.Duration) (state.Repository, error) {
	return s.modifyRepo(ctx, repo, func(_ pgx.Tx, r *state.Repository) (bool, error) {
		changed := r.Retention != d
		r.Retention = d
		return changed, nil
	})
}

// Version implements state.Store.
func (s *Store) Version(ctx context.Context) (v uint64, err error) {
	err = s.read(ctx, func(tx pgx.Tx) error {
		v, err = version(ctx, tx)
		return err
	})
	return v, err
}

// BumpVersion implements state.Store.
func (s *Store) BumpVersion(ctx context.Context) (v uint64, err error) {
	err = s.write(ctx, func(tx pgx.Tx) error {
		v, err = bumpVersion(ctx, tx)
		return err
	})
	return v, err
}

// Snapshot implements state.Store.
func (s *Store) Snapshot(ctx context.Context) (snap state.Snapshot, err error) {
	err = s.read(ctx, func(tx pgx.Tx) error {
		if snap.Version, err = version(ctx, tx); err != nil {
			return err
		}
		snap.Repositories, err = allRepos(ctx, tx)
		return err
	})
	return snap, err
}
