package bolt

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	bbolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/armor-apt/armor/controld/state"
)

var _ state.Store = (*Store)(nil)

// schema is the layout version written in the meta bucket.
const schema = "1"

var (
	bMeta      = []byte("meta")
	bRepos     = []byte("repos")
	bHosts     = []byte("hosts")
	bReleases  = []byte("releases")
	bHistory   = []byte("history")
	bTokens    = []byte("tokens")
	bTokenHash = []byte("tokenhash")
	kSchema    = []byte("schema")
	kVersion   = []byte("version")
)

// ErrLocked means another process (a running controld) has the database open.
var ErrLocked = errors.New("state database is in use by another process")

// Store is the bbolt state store.
type Store struct {
	db *bbolt.DB
}

// Options tune Open.
type Options struct {
	// LockTimeout is how long Open waits for another process to release the file
	// (default 1s); then it fails with ErrLocked.
	LockTimeout time.Duration
	// NoSync skips fsync on commit. Only for tests that do not simulate crashes.
	NoSync bool
}

// Open opens or creates the database file at path.
func Open(path string, opts *Options) (*Store, error) {
	o := Options{LockTimeout: time.Second}
	if opts != nil {
		o = *opts
		if o.LockTimeout <= 0 {
			o.LockTimeout = time.Second
		}
	}
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: o.LockTimeout, NoSync: o.NoSync})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("open state %s: %w", path, ErrLocked)
	}
	if err != nil {
		return nil, fmt.Errorf("open state %s: %w", path, err)
	}
	if err := db.Update(initialize); err != nil {
		db.Close()
		return nil, fmt.Errorf("open state %s: %w", path, err)
	}
	return &Store{db: db}, nil
}

func initialize(tx *bbolt.Tx) error {
	for _, name := range [][]byte{bMeta, bRepos, bHosts, bReleases, bHistory, bTokens, bTokenHash} {
		if _, err := tx.CreateBucketIfNotExists(name); err != nil {
			return err
		}
	}
	meta := tx.Bucket(bMeta)
	switch v := meta.Get(kSchema); {
	case v == nil:
		if err := meta.Put(kSchema, []byte(schema)); err != nil {
			return err
		}
		return meta.Put(kVersion, u64(1))
	case string(v) != schema:
		return fmt.Errorf("state schema %q is not supported (this controld reads %q)", v, schema)
	}
	return nil
}

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

// Check runs bbolt's page-level consistency check and then state.Verify.
func (s *Store) Check(ctx context.Context) error {
	var errs []error
	err := s.db.View(func(tx *bbolt.Tx) error {
		for err := range tx.Check() {
			errs = append(errs, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	errs = append(errs, state.Verify(ctx, s))
	return errors.Join(errs...)
}

func (s *Store) view(ctx context.Context, fn func(*bbolt.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.db.View(fn)
}

func (s *Store) update(ctx context.Context, fn func(*bbolt.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.db.Update(fn)
}

func u64(n uint64) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint64(b, n)
	return b
}

func getJSON(b *bbolt.Bucket, key string, v any) (bool, error) {
	data := b.Get([]byte(key))
	if data == nil {
		return false, nil
	}
	if err := json.Unmarshal(data, v); err != nil {
		return false, fmt.Errorf("decode %T record %q: %w", v, key, err)
	}
	return true, nil
}

func putJSON(b *bbolt.Bucket, key []byte, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return b.Put(key, data)
}

func bumpVersion(tx *bbolt.Tx) (uint64, error) {
	meta := tx.Bucket(bMeta)
	v := binary.BigEndian.Uint64(meta.Get(kVersion)) + 1
	return v, meta.Put(kVersion, u64(v))
}

func getRepo(tx *bbolt.Tx, name string) (state.Repository, error) {
	var r state.Repository
	ok, err := getJSON(tx.Bucket(bRepos), name, &r)
	if err != nil {
		return r, err
	}
	if !ok {
		return r, fmt.Errorf("repository %s: %w", name, state.ErrNotFound)
	}
	return r, nil
}

func putRepo(tx *bbolt.Tx, r state.Repository) error {
	return putJSON(tx.Bucket(bRepos), []byte(r.Name), r)
}

// CreateRepository implements state.Store.
func (s *Store) CreateRepository(ctx context.Context, r state.Repository) error {
	return s.update(ctx, func(tx *bbolt.Tx) error {
		if tx.Bucket(bRepos).Get([]byte(r.Name)) != nil {
			return fmt.Errorf("repository %s: %w", r.Name, state.ErrExists)
		}
		hosts := r.Hostnames
		r.Hostnames = nil
		if _, err := claimHosts(tx, &r, hosts); err != nil {
			return err
		}
		r.Active, r.Retired = nil, nil
		if _, err := tx.Bucket(bReleases).CreateBucket([]byte(r.Name)); err != nil {
			return err
		}
		if _, err := tx.Bucket(bHistory).CreateBucket([]byte(r.Name)); err != nil {
			return err
		}
		if err := putRepo(tx, r); err != nil {
			return err
		}
		_, err := bumpVersion(tx)
		return err
	})
}

// claimHosts adds hosts to r (and the hosts index), reporting whether any was new.
func claimHosts(tx *bbolt.Tx, r *state.Repository, hosts []string) (bool, error) {
	idx := tx.Bucket(bHosts)
	added := false
	for _, h := range hosts {
		owner := idx.Get([]byte(h))
		switch {
		case owner == nil:
			if err := idx.Put([]byte(h), []byte(r.Name)); err != nil {
				return false, err
			}
			r.Hostnames = append(r.Hostnames, h)
			added = true
		case string(owner) != r.Name:
			return false, &state.HostnameTakenError{Hostname: h, Owner: string(owner)}
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
	err = s.view(ctx, func(tx *bbolt.Tx) error {
		r, err = getRepo(tx, name)
		return err
	})
	return r, err
}

// Repositories implements state.Store.
func (s *Store) Repositories(ctx context.Context) (out []state.Repository, err error) {
	err = s.view(ctx, func(tx *bbolt.Tx) error {
		out, err = allRepos(tx)
		return err
	})
	return out, err
}

func allRepos(tx *bbolt.Tx) ([]state.Repository, error) {
	var out []state.Repository
	err := tx.Bucket(bRepos).ForEach(func(k, v []byte) error {
		var r state.Repository
		if err := json.Unmarshal(v, &r); err != nil {
			return fmt.Errorf("decode repository %q: %w", k, err)
		}
		out = append(out, r)
		return nil
	})
	return out, err // bbolt iterates in key order: sorted by name
}

// modifyRepo runs fn on a repository in one update and stores the result; fn reports
// whether the routes version must grow.
func (s *Store) modifyRepo(ctx context.Context, name string, fn func(tx *bbolt.Tx, r *state.Repository) (bool, error)) (r state.Repository, err error) {
	err = s.update(ctx, func(tx *bbolt.Tx) error {
		r, err = getRepo(tx, name)
		if err != nil {
			return err
		}
		bump, err := fn(tx, &r)
		if err != nil {
			return err
		}
		if err := putRepo(tx, r); err != nil {
			return err
		}
		if bump {
			_, err = bumpVersion(tx)
		}
		return err
	})
	return r, err
}

// AddHostnames implements state.Store.
func (s *Store) AddHostnames(ctx context.Context, repo string, hostnames []string) (state.Repository, error) {
	return s.modifyRepo(ctx, repo, func(tx *bbolt.Tx, r *state.Repository) (bool, error) {
		return claimHosts(tx, r, hostnames)
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

// changeKeys runs fn on a repository's keys in one update: the routes version grows
// (edges serve the keys) and fn's event is appended.
func (s *Store) changeKeys(ctx context.Context, name string, fn func(r *state.Repository) (state.Event, error)) (r state.Repository, err error) {
	err = s.update(ctx, func(tx *bbolt.Tx) error {
		if r, err = getRepo(tx, name); err != nil {
			return err
		}
		ev, err := fn(&r)
		if err != nil {
			return err
		}
		if err := putRepo(tx, r); err != nil {
			return err
		}
		if ev.RoutesVersion, err = bumpVersion(tx); err != nil {
			return err
		}
		_, _, err = appendEvent(tx, ev, ev.At)
		return err
	})
	return r, err
}

// SetRetention implements state.Store.
func (s *Store) SetRetention(ctx context.Context, repo string, d time.Duration) (state.Repository, error) {
	return s.modifyRepo(ctx, repo, func(_ *bbolt.Tx, r *state.Repository) (bool, error) {
		changed := r.Retention != d
		r.Retention = d
		return changed, nil
	})
}

// Version implements state.Store.
func (s *Store) Version(ctx context.Context) (v uint64, err error) {
	err = s.view(ctx, func(tx *bbolt.Tx) error {
		v = binary.BigEndian.Uint64(tx.Bucket(bMeta).Get(kVersion))
		return nil
	})
	return v, err
}

// BumpVersion implements state.Store.
func (s *Store) BumpVersion(ctx context.Context) (v uint64, err error) {
	err = s.update(ctx, func(tx *bbolt.Tx) error {
		v, err = bumpVersion(tx)
		return err
	})
	return v, err
}

// Snapshot implements state.Store.
func (s *Store) Snapshot(ctx context.Context) (snap state.Snapshot, err error) {
	err = s.view(ctx, func(tx *bbolt.Tx) error {
		snap.Version = binary.BigEndian.Uint64(tx.Bucket(bMeta).Get(kVersion))
		snap.Repositories, err = allRepos(tx)
		return err
	})
	return snap, err
}
