package controld_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/armor-apt/armor/controld"
	"github.com/armor-apt/armor/controld/api"
	"github.com/armor-apt/armor/controld/client"
	"github.com/armor-apt/armor/controld/state"
	"github.com/armor-apt/armor/controld/state/bolt"
	"github.com/armor-apt/armor/controld/state/postgres"
	"github.com/armor-apt/armor/internal/testkit/pgtest"
	"github.com/armor-apt/armor/store"
)

// boltState fills a bbolt state with every kind of record: two repositories with
// hostnames, a key and a retention; releases, activations, a rollback (its mark), a
// deleted release, a known-missing object; tokens, one revoked. It returns the data
// directory and a token's secret.
func boltState(t *testing.T) (dir, secret string) {
	t.Helper()
	ctx := context.Background()
	dir = t.TempDir()
	secret, err := controld.CreateToken(dir, "root", []string{"*"}, api.Actions)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := controld.CreateToken(dir, "gone", []string{"demo"}, []string{"read"}); err != nil {
		t.Fatal(err)
	}
	st, err := bolt.Open(filepath.Join(dir, controld.DBFile), &bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	t0 := time.Date(2026, 11, 22, 8, 0, 0, 123456789, time.UTC)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(st.CreateRepository(ctx, state.Repository{Name: "demo", Hostnames: []string{"b.demo.test", "a.demo.test"},
		Keys: []state.Key{{Fingerprint: "AAAA", Armored: "key", AddedAt: t0, AddedBy: "root"}}, Retention: 48 * time.Hour, CreatedAt: t0, CreatedBy: "root"}))
	must(st.CreateRepository(ctx, state.Repository{Name: "empty", Retention: time.Hour, CreatedAt: t0, CreatedBy: "root"}))
	must(st.CreateHook(ctx, state.Hook{ID: "h1", URL: "https://hooks.demo.test/", Events: []string{"activate", "record", "rollback"},
		Repositories: []string{"demo"}, Secret: "s3cret", CreatedAt: t0, CreatedBy: "root"}))
	id := func(s string) string { return (strings.Repeat(s, 64))[:64] }
	rel := func(name, parent string) state.Release {
		return state.Release{Repository: "demo", ID: id(name), Manifest: id(name + "e"), Parent: parent, Packages: 1, Files: 3, Size: 10, PushedBy: "ci", PushedAt: t0}
	}
	prev := ""
	for i, name := range []string{"1", "2", "3", "4"} {
		out, err := st.RecordRelease(ctx, rel(name, prev), &state.Flip{Expect: prev, By: "ci", At: t0.Add(time.Duration(i) * time.Hour)})
		must(err)
		prev = out.Release.ID
	}
	_, err = st.Activate(ctx, state.Flip{Repository: "demo", Expect: id("4"), Rollback: true, By: "ops", At: t0.Add(5 * time.Hour)})
	must(err)
	_, err = st.DeleteRelease(ctx, state.Deletion{Repository: "demo", ID: id("1"), By: "gc", At: t0.Add(100 * time.Hour)})
	must(err)
	// A draft, the latest release recorded, deleted: the next release is numbered after it.
	_, err = st.RecordRelease(ctx, rel("5", id("4")), nil)
	must(err)
	_, err = st.DeleteRelease(ctx, state.Deletion{Repository: "demo", ID: id("5"), By: "gc", At: t0.Add(100 * time.Hour)})
	must(err)
	must(st.PutCertFile(ctx, "certificates/acme/apt.demo.test/apt.demo.test.crt", []byte("-----BEGIN CERTIFICATE-----"), t0))
	must(st.MarkMissing(ctx, "demo", []state.MissingObject{{SHA256: id("9"), Size: 7, Problem: state.ObjectMissing, FoundAt: t0, FoundBy: "ci"}}))
	// The hook's first delivery was made, the second is leased to a process (the lease
	// is not copied), the rest wait.
	ds, err := st.ClaimDeliveries(ctx, state.Claim{By: "r1", Now: t0, Lease: time.Minute, Limit: 2})
	must(err)
	_, err = st.FinishDelivery(ctx, ds[0].ID, ds[0].Lease.Token, state.Attempt{At: t0, By: "r1", OK: true, Status: 200}, time.Time{})
	must(err)
	_, err = st.RevokeToken(ctx, "gone", "root", t0)
	must(err)
	return dir, secret
}

// TestMigrate: armor controld migrate copies every record of a bbolt state into an
// empty PostgreSQL database, so that a controld on it carries on where the old one
// stopped: the same tokens, repositories, releases (with their sequence numbers),
// history, rollback marks and deletions, and new releases numbered after the old.
func TestMigrate(t *testing.T) {
	ctx := context.Background()
	dir, secret := boltState(t)
	db := pgtest.Database(t)
	m, err := controld.Migrate(ctx, "bolt:"+dir, db)
	if err != nil {
		t.Fatal(err)
	}
	if want := (controld.Migrated{Repositories: 2, Releases: 3, History: 5, Deleted: 2, RolledBack: 1, Missing: 1, Tokens: 2, Hooks: 1, Deliveries: 10, CertFiles: 1}); m != want {
		t.Errorf("migrated %v, want %v", m, want)
	}

	src, err := bolt.Open(filepath.Join(dir, controld.DBFile), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := postgres.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	want, got := dumpJSON(t, src), dumpJSON(t, dst)
	if got != want {
		t.Errorf("the database reads as\n%s\nwant, as the bbolt file reads,\n%s", got, want)
	}

	if v, w := must2(dst.Version(ctx))(t), must2(src.Version(ctx))(t); v != w {
		t.Errorf("routes version of the copy = %d, want the bbolt file's %d, so edges see no change", v, w)
	}

	// A controld on the database takes the migrated token and goes on numbering.
	rs := &replicas{t: t, db: db, secret: secret, key: loadKey(t, "eddsa")}
	rs.store = store.NewMemory()
	a := rs.start()
	rels, err := a.admin.Releases(ctx, "demo")
	if err != nil || len(rels) != 3 {
		t.Fatalf("releases through a controld on the copy: %+v, %v", rels, err)
	}
	next, err := dst.RecordRelease(ctx, state.Release{Repository: "demo", ID: strings.Repeat("7", 64), Manifest: strings.Repeat("8", 64),
		Parent: rels[2].ID, PushedBy: "ci"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if next.Release.Seq != 6 {
		t.Errorf("a release recorded after the migration has Seq %d, want 6 (after the five recorded before, the last deleted)", next.Release.Seq)
	}
	ds, err := dst.Deliveries(ctx, state.DeliveryQuery{Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 2 || ds[0].ID != ds[1].ID+1 || ds[0].Event.Seq != ds[1].Event.Seq+1 || ds[0].Event.Release.ID != next.Release.ID {
		t.Errorf("the delivery of a release recorded after the migration does not follow the migrated ones: %+v", ds)
	}
	if _, err := client.New(a.url, secret, http.DefaultClient).Routes(ctx, 0, 0); err != nil {
		t.Errorf("routes from a controld on the copy: %v", err)
	}
}

// dumpJSON renders everything a store holds, for comparing two stores, but the leases
// of deliveries, which a migration drops.
func dumpJSON(t *testing.T, st state.Store) string {
	t.Helper()
	c, err := postgres.ReadContents(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	for i := range c.Deliveries {
		c.Deliveries[i].Lease = nil
	}
	b, err := json.MarshalIndent(c, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestMigrateRefuses: migrate changes nothing when asked to copy into a database that
// holds state already, from a path without a state, or with a source it cannot parse.
func TestMigrateRefuses(t *testing.T) {
	ctx := context.Background()
	dir, _ := boltState(t)
	db := pgtest.Database(t)
	if _, err := controld.CreateTokenIn(ctx, db, "", "first", []string{"*"}, []string{"read"}); err != nil {
		t.Fatal(err)
	}
	_, err := controld.Migrate(ctx, "bolt:"+dir, db)
	if !errors.Is(err, postgres.ErrNotEmpty) || !strings.Contains(err.Error(), "1 tokens") {
		t.Errorf("migrate into a database with a token: %v, want ErrNotEmpty naming it", err)
	}
	st, err := postgres.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if repos, _ := st.Repositories(ctx); len(repos) != 0 {
		t.Errorf("a refused migration left repositories: %+v", repos)
	}

	// A controld running on the file holds its lock: migrate says to stop it.
	running, err := bolt.Open(filepath.Join(dir, controld.DBFile), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = controld.Migrate(ctx, "bolt:"+dir, pgtest.Database(t))
	running.Close()
	if !errors.Is(err, bolt.ErrLocked) || !strings.Contains(err.Error(), "stop controld first") {
		t.Errorf("migrate from a file in use: %v, want ErrLocked saying to stop controld", err)
	}

	empty := t.TempDir()
	for _, tc := range []struct{ from, to, want string }{
		{"bolt:" + empty, db, "no controld state"},
		{"bolt:" + filepath.Join(empty, "nope.db"), db, "no such file"},
		{dir, db, "use bolt:PATH"},
		{"bolt:" + dir, "mysql://x", "postgres://"},
	} {
		_, err := controld.Migrate(ctx, tc.from, tc.to)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("migrate %s → %s: %v, want an error saying %q", tc.from, tc.to, err, tc.want)
		}
	}
	if entries, _ := os.ReadDir(empty); len(entries) != 0 {
		t.Errorf("a refused migration made files in the source directory: %v", entries)
	}
}

func must2[T any](v T, err error) func(t *testing.T) T {
	return func(t *testing.T) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}
