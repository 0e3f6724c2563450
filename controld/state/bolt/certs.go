package bolt

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/armor-apt/armor/controld/state"
)

// The edges' certificate storage (state.CertStorage), in buckets made on first use:
//
//	certfiles   key → JSON state.CertFile
//	certlocks   name → JSON state.CertLock
var (
	bCertFiles = []byte("certfiles")
	bCertLocks = []byte("certlocks")
)

// PutCertFile implements state.CertStorage.
func (s *Store) PutCertFile(ctx context.Context, key string, value []byte, at time.Time) error {
	return s.update(ctx, func(tx *bbolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bCertFiles)
		if err != nil {
			return err
		}
		return putJSON(b, []byte(key), state.CertFile{Key: key, Value: value, Modified: at.UTC().Truncate(time.Microsecond)})
	})
}

// CertFile implements state.CertStorage.
func (s *Store) CertFile(ctx context.Context, key string) (f state.CertFile, err error) {
	err = s.view(ctx, func(tx *bbolt.Tx) error {
		ok := false
		if b := tx.Bucket(bCertFiles); b != nil {
			if ok, err = getJSON(b, key, &f); err != nil {
				return err
			}
		}
		if !ok {
			return fmt.Errorf("certificate storage key %s: %w", key, state.ErrNotFound)
		}
		return nil
	})
	return f, err
}

// eachUnder calls fn for every key of b at key or under key/, in order.
func eachUnder(b *bbolt.Bucket, key string, fn func(k, v []byte) error) error {
	c := b.Cursor()
	for k, v := c.Seek([]byte(key)); k != nil && bytes.HasPrefix(k, []byte(key)); k, v = c.Next() {
		if state.UnderKey(string(k), key) {
			if err := fn(k, v); err != nil {
				return err
			}
		}
	}
	return nil
}

// DeleteCertFiles implements state.CertStorage.
func (s *Store) DeleteCertFiles(ctx context.Context, key string) (n int, err error) {
	err = s.update(ctx, func(tx *bbolt.Tx) error {
		n = 0
		b := tx.Bucket(bCertFiles)
		if b == nil {
			return nil
		}
		var drop [][]byte
		if err := eachUnder(b, key, func(k, _ []byte) error {
			drop = append(drop, bytes.Clone(k))
			return nil
		}); err != nil {
			return err
		}
		for _, k := range drop {
			if err := b.Delete(k); err != nil {
				return err
			}
		}
		n = len(drop)
		return nil
	})
	return n, err
}

// CertFiles implements state.CertStorage.
func (s *Store) CertFiles(ctx context.Context, prefix string) (out []state.CertFileInfo, err error) {
	err = s.view(ctx, func(tx *bbolt.Tx) error {
		b := tx.Bucket(bCertFiles)
		if b == nil {
			return nil
		}
		return eachUnder(b, prefix, func(k, v []byte) error {
			var f state.CertFile
			if err := json.Unmarshal(v, &f); err != nil {
				return fmt.Errorf("decode certificate storage key %q: %w", k, err)
			}
			out = append(out, state.CertFileInfo{Key: f.Key, Size: int64(len(f.Value)), Modified: f.Modified})
			return nil
		})
	})
	return out, err
}

// LockCert implements state.CertStorage.
func (s *Store) LockCert(ctx context.Context, name, holder string, now time.Time, ttl time.Duration) (l state.CertLock, ok bool, err error) {
	err = s.update(ctx, func(tx *bbolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bCertLocks)
		if err != nil {
			return err
		}
		var cur state.CertLock
		held, err := getJSON(b, name, &cur)
		if err != nil {
			return err
		}
		if held && cur.Holder != holder && cur.Until.After(now) {
			l, ok = cur, false
			return nil
		}
		l, ok = state.CertLock{Name: name, Holder: holder, Until: now.Add(ttl)}, true
		return putJSON(b, []byte(name), l)
	})
	return l, ok, err
}

// UnlockCert implements state.CertStorage.
func (s *Store) UnlockCert(ctx context.Context, name, holder string) error {
	return s.update(ctx, func(tx *bbolt.Tx) error {
		b := tx.Bucket(bCertLocks)
		if b == nil {
			return nil
		}
		var cur state.CertLock
		held, err := getJSON(b, name, &cur)
		switch {
		case err != nil:
			return err
		case !held:
			return nil
		case cur.Holder != holder:
			return fmt.Errorf("certificate lock %s is held by %s, not %s: %w", name, cur.Holder, holder, state.ErrConflict)
		}
		return b.Delete([]byte(name))
	})
}
