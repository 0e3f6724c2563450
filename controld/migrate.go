package controld

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"

	"github.com/armor-apt/armor/controld/state"
	"github.com/armor-apt/armor/controld/state/bolt"
	"github.com/armor-apt/armor/controld/state/postgres"
)

// Migrated counts what Migrate copied.
type Migrated struct {
	Repositories, Releases, History, Deleted, RolledBack, Missing, Tokens, Hooks, Deliveries, CertFiles int
}

func (m Migrated) String() string {
	return fmt.Sprintf("%d repositories, %d releases (%d deleted), %d history entries, %d rolled-back marks, %d known-missing objects, %d tokens, %d hooks (%d deliveries), %d certificate storage files",
		m.Repositories, m.Releases, m.Deleted, m.History, m.RolledBack, m.Missing, m.Tokens, m.Hooks, m.Deliveries, m.CertFiles)
}

// Migrate copies controld's state from a bbolt file (from is "bolt:PATH", PATH the
// controld.db file or the data directory holding it) into an empty PostgreSQL database
// (to is a postgres:// URL), in one transaction, and then reads both back and compares
// them. controld must not be running on the file (it is locked), and the database must
// hold no state yet; the source is never changed.
func Migrate(ctx context.Context, from, to string) (Migrated, error) {
	path, ok := strings.CutPrefix(from, "bolt:")
	if !ok || path == "" {
		return Migrated{}, fmt.Errorf("migrate: --from %q: use bolt:PATH, PATH being controld.db or the data directory holding it", from)
	}
	if !postgres.IsURL(to) {
		return Migrated{}, errors.New("migrate: --to must be a postgres:// (or postgresql://) URL")
	}
	if fi, err := os.Stat(path); err != nil {
		return Migrated{}, fmt.Errorf("migrate: %w", err)
	} else if fi.IsDir() {
		path = filepath.Join(path, DBFile)
		if _, err := os.Stat(path); err != nil {
			return Migrated{}, fmt.Errorf("migrate: no controld state in that directory: %w", err)
		}
	}
	src, err := bolt.Open(path, nil)
	if err != nil {
		if errors.Is(err, bolt.ErrLocked) {
			return Migrated{}, fmt.Errorf("migrate: %w (stop controld first)", err)
		}
		return Migrated{}, fmt.Errorf("migrate: %w", err)
	}
	defer src.Close()
	if err := src.Check(ctx); err != nil {
		return Migrated{}, fmt.Errorf("migrate: %s is inconsistent, nothing was copied: %w", path, err)
	}
	c, err := postgres.ReadContents(ctx, src)
	if err != nil {
		return Migrated{}, fmt.Errorf("migrate: read %s: %w", path, err)
	}
	dst, err := postgres.Open(ctx, to)
	if err != nil {
		return Migrated{}, fmt.Errorf("migrate: %w", err)
	}
	defer dst.Close()
	if err := dst.Import(ctx, c); err != nil {
		return Migrated{}, fmt.Errorf("migrate into %s: %w", dst.String(), err)
	}
	copied, err := postgres.ReadContents(ctx, dst)
	if err != nil {
		return Migrated{}, fmt.Errorf("migrate: read back %s: %w", dst.String(), err)
	}
	if !reflect.DeepEqual(normalise(c), normalise(copied)) {
		return Migrated{}, fmt.Errorf("migrate: %s does not read back as %s was read (the copy is in the database: drop it before trying again)", dst.String(), path)
	}
	if err := state.Verify(ctx, dst); err != nil {
		return Migrated{}, fmt.Errorf("migrate: the copy in %s is inconsistent: %w", dst.String(), err)
	}
	m := Migrated{Repositories: len(c.Repositories), Tokens: len(c.Tokens), Hooks: len(c.Hooks), Deliveries: len(c.Deliveries), CertFiles: len(c.CertFiles)}
	for _, r := range c.Repositories {
		m.Releases += len(r.Releases)
		m.History += len(r.History)
		m.Deleted += len(r.Deleted)
		m.RolledBack += len(r.RolledBack)
		m.Missing += len(r.Missing)
	}
	return m, nil
}

// normalise makes two reads comparable: times through the same JSON round trip both
// stores make already, so only nil against empty slices could differ, and the leases
// of deliveries, which are not copied.
func normalise(c postgres.Contents) postgres.Contents {
	for i := range c.Deliveries {
		c.Deliveries[i].Lease = nil
	}
	for i := range c.Repositories {
		r := &c.Repositories[i]
		if len(r.Hostnames) == 0 {
			r.Hostnames = nil
		}
		if len(r.Keys) == 0 {
			r.Keys = nil
		}
		if len(r.Retired) == 0 {
			r.Retired = nil
		}
	}
	return c
}
