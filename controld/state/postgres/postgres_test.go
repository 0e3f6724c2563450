package postgres_test

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/armor-apt/armor/controld/state"
	"github.com/armor-apt/armor/controld/state/postgres"
	"github.com/armor-apt/armor/controld/state/statetest"
	"github.com/armor-apt/armor/internal/testkit/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

func open(t *testing.T, url string) *postgres.Store {
	t.Helper()
	st, err := postgres.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func TestSuite(t *testing.T) {
	statetest.Run(t, func(t *testing.T) state.Store {
		st := open(t, pgtest.Database(t))
		t.Cleanup(func() {
			if err := st.Check(context.Background()); err != nil {
				t.Errorf("check: %v", err)
			}
		})
		return st
	})
}

// TestReopen: the state survives a reopen (and a second Open migrates nothing).
func TestReopen(t *testing.T) {
	ctx := context.Background()
	url := pgtest.Database(t)
	st := open(t, url)
	if err := st.CreateRepository(ctx, state.Repository{Name: "a", Hostnames: []string{"a.test"}}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	st = open(t, url)
	r, err := st.Repository(ctx, "a")
	if err != nil || len(r.Hostnames) != 1 {
		t.Fatalf("after reopen: %+v, %v", r, err)
	}
	if v, _ := st.Version(ctx); v != 2 {
		t.Errorf("version after reopen = %d, want 2", v)
	}
}

// TestSchemaTooNew: a database migrated by a newer controld is refused, naming both
// versions, and left as it was.
func TestSchemaTooNew(t *testing.T) {
	ctx := context.Background()
	url := pgtest.Database(t)
	open(t, url).Close()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	newer := postgres.SchemaVersion + 7
	if _, err := conn.Exec(ctx, `INSERT INTO armor_schema (version) VALUES ($1)`, newer); err != nil {
		t.Fatal(err)
	}
	_, err = postgres.Open(ctx, url)
	var tooNew *postgres.SchemaTooNewError
	if !errors.As(err, &tooNew) || tooNew.Database != newer || tooNew.Binary != postgres.SchemaVersion {
		t.Fatalf("open = %v, want SchemaTooNewError(%d, %d)", err, newer, postgres.SchemaVersion)
	}
	for _, want := range []string{"version " + strconv.Itoa(newer), "version " + strconv.Itoa(postgres.SchemaVersion)} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
}

// TestUnreachable: a database that does not answer is ErrUnavailable at Open, naming
// where it was looked for; and a server lost while the store is open makes calls
// ErrUnavailable until it is back.
func TestUnreachable(t *testing.T) {
	ctx := context.Background()
	srv := pgtest.Start(t)
	url := srv.Database(t)
	st := open(t, url)
	if err := st.CreateToken(ctx, state.Token{Name: "a", Hash: "h"}); err != nil {
		t.Fatal(err)
	}
	woke := make(chan struct{}, 64)
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	go st.Watch(watchCtx, func() { woke <- struct{}{} }, nil)
	waitWake(t, woke, "Watch did not connect")
	srv.Stop()
	_, err := st.TokenByHash(ctx, "h")
	if !errors.Is(err, state.ErrUnavailable) {
		t.Errorf("token lookup with the server down: %v, want ErrUnavailable", err)
	}
	_, err = st.Activate(ctx, state.Flip{Repository: "a", To: "x"})
	if !errors.Is(err, state.ErrUnavailable) {
		t.Errorf("activate with the server down: %v, want ErrUnavailable", err)
	}
	_, err = postgres.Open(ctx, url+"&connect_timeout=2")
	if !errors.Is(err, state.ErrUnavailable) || !strings.Contains(err.Error(), "127.0.0.1:") || !strings.Contains(err.Error(), "unreachable") {
		t.Errorf("open with the server down: %v, want ErrUnavailable naming the address", err)
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		tok, err := st.TokenByHash(ctx, "h")
		if err == nil {
			if tok.Name != "a" {
				t.Errorf("token after restart = %+v", tok)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("token lookup after the restart: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Watch is back on the restarted server: it tells once on reconnecting (what it
	// missed), then of a bump by another store.
	waitWake(t, woke, "Watch did not reconnect after the restart")
	for len(woke) > 0 {
		<-woke
	}
	if _, err := open(t, url).BumpVersion(ctx); err != nil {
		t.Fatal(err)
	}
	waitWake(t, woke, "Watch missed a bump after the restart")
}

func waitWake(t *testing.T, woke <-chan struct{}, msg string) {
	t.Helper()
	select {
	case <-woke:
	case <-time.After(30 * time.Second):
		t.Fatal(msg)
	}
}

// TestWatch: a version bump in one store wakes Watch on another store of the same
// database.
func TestWatch(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	url := pgtest.Database(t)
	a, b := open(t, url), open(t, url)
	woke := make(chan struct{}, 16)
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.Watch(ctx, func() { woke <- struct{}{} }, func(err error) { t.Logf("watch: %v", err) })
	}()
	select { // the first call follows the connection
	case <-woke:
	case <-time.After(10 * time.Second):
		t.Fatal("Watch did not connect")
	}
	if _, err := a.BumpVersion(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-woke:
	case <-time.After(10 * time.Second):
		t.Fatal("a bump in another store did not wake Watch")
	}
	cancel()
	<-done
}

// TestLocks: the collector's locks hold across stores (processes) on one database:
// recordings share theirs, deletion excludes them, one collection at a time.
func TestLocks(t *testing.T) {
	ctx := context.Background()
	url := pgtest.Database(t)
	a, b := open(t, url), open(t, url)
	// A lock that must be refused is asked for briefly; one that must be granted gets a
	// long deadline, since a held lock would make it wait for ever anyway and a loaded
	// machine (make test beside other work) may take more than a moment to grant it.
	within := func(d time.Duration) context.Context {
		c, cancel := context.WithTimeout(ctx, d)
		t.Cleanup(cancel)
		return c
	}
	short := func() context.Context { return within(300 * time.Millisecond) }
	long := func() context.Context { return within(30 * time.Second) }
	relA, err := a.HoldRecording(ctx)
	if err != nil {
		t.Fatal(err)
	}
	relB, err := b.HoldRecording(long())
	if err != nil {
		t.Fatalf("a second recording waited for the first: %v", err)
	}
	if _, err := b.HoldDeletion(short()); err == nil {
		t.Fatal("deletion was let in while recordings run")
	}
	relA()
	relB()
	del, err := b.HoldDeletion(long())
	if err != nil {
		t.Fatalf("deletion after the recordings ended: %v", err)
	}
	if _, err := a.HoldRecording(short()); err == nil {
		t.Fatal("a recording was let in during a deletion")
	}
	del()
	if rel, err := a.HoldRecording(long()); err != nil {
		t.Fatalf("recording after the deletion: %v", err)
	} else {
		rel()
	}

	stop, ok, err := a.TryCollect(ctx)
	if err != nil || !ok {
		t.Fatalf("first collection: %v, %v", ok, err)
	}
	if _, ok, err := b.TryCollect(ctx); err != nil || ok {
		t.Fatalf("second collection at once: ok %v, %v; want refused", ok, err)
	}
	stop()
	if stop, ok, err := b.TryCollect(ctx); err != nil || !ok {
		t.Fatalf("collection after the first ended: %v, %v", ok, err)
	} else {
		stop()
	}
}
