package bolt

import (
	"context"
	"encoding/json"
	"fmt"

	bbolt "go.etcd.io/bbolt"

	"github.com/armor-apt/armor/controld/state"
)

// bMissing holds missing/<repo> (sha256 → JSON state.MissingObject). It is made on the
// first report, so a database written before it needs no migration.
var bMissing = []byte("missing")

// MarkMissing implements state.MissingObjects.
func (s *Store) MarkMissing(ctx context.Context, repo string, objs []state.MissingObject) error {
	return s.update(ctx, func(tx *bbolt.Tx) error {
		if _, err := getRepo(tx, repo); err != nil {
			return err
		}
		root, err := tx.CreateBucketIfNotExists(bMissing)
		if err != nil {
			return err
		}
		b, err := root.CreateBucketIfNotExists([]byte(repo))
		if err != nil {
			return err
		}
		for _, o := range objs {
			if err := putJSON(b, []byte(o.SHA256), o); err != nil {
				return err
			}
		}
		return nil
	})
}

// ClearMissing implements state.MissingObjects.
func (s *Store) ClearMissing(ctx context.Context, repo string, sums []string) error {
	return s.update(ctx, func(tx *bbolt.Tx) error {
		if _, err := getRepo(tx, repo); err != nil {
			return err
		}
		b := missingBucket(tx, repo)
		if b == nil {
			return nil
		}
		for _, sum := range sums {
			if err := b.Delete([]byte(sum)); err != nil {
				return err
			}
		}
		return nil
	})
}

// Missing implements state.MissingObjects; bbolt's keys are sorted, so the set is too.
func (s *Store) Missing(ctx context.Context, repo string) (out []state.MissingObject, err error) {
	err = s.view(ctx, func(tx *bbolt.Tx) error {
		if _, err := getRepo(tx, repo); err != nil {
			return err
		}
		b := missingBucket(tx, repo)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			var o state.MissingObject
			if err := json.Unmarshal(v, &o); err != nil {
				return fmt.Errorf("decode missing object %q: %w", k, err)
			}
			out = append(out, o)
			return nil
		})
	})
	return out, err
}

func missingBucket(tx *bbolt.Tx, repo string) *bbolt.Bucket {
	root := tx.Bucket(bMissing)
	if root == nil {
		return nil
	}
	return root.Bucket([]byte(repo))
}
