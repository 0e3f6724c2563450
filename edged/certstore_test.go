package edged

import (
	"context"
	"errors"
	"io/fs"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"

	"github.com/armor-apt/armor/internal/duration"
	"github.com/armor-apt/armor/internal/testkit/controldtest"
	"github.com/armor-apt/armor/store"
)

// sharedFor returns the shared storage of a new edge whose controld is ctl.
func sharedFor(t *testing.T, ctl *controldtest.Server, ttl time.Duration) *sharedStorage {
	t.Helper()
	cfg := Config{Controld: ctl.URL, Token: ctl.Secret, StateDir: t.TempDir(), ACMEStorage: StorageControld,
		ACMELockTTL: duration.Duration(ttl)}
	e, err := New(cfg, newTestStore(), testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	s, err := newSharedStorage(e, filepath.Join(cfg.StateDir, acmeSubdir))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestSharedStorage: the storage in controld answers every call as certmagic's own
// FileStorage does with the same files (a differential test), and a second edge sees
// what the first stored.
func TestSharedStorage(t *testing.T) {
	ctx := context.Background()
	ctl := controldtest.Start(t, store.NewMemory())
	a, b := sharedFor(t, ctl, 30*time.Second), sharedFor(t, ctl, 30*time.Second)
	file := &certmagic.FileStorage{Path: t.TempDir()}
	files := map[string]string{
		"certificates/acme-ca/apt.a.test/apt.a.test.crt":   "crt",
		"certificates/acme-ca/apt.a.test/apt.a.test.key":   "key",
		"certificates/acme-ca/apt.a.test/apt.a.test.json":  "{}",
		"certificates/acme-ca/apt.ab.test/apt.ab.test.crt": "crt2",
		"acme/acme-ca/users/ops@example.org/ops.key":       "account",
		"ocsp/apt.a.test-1234":                             "staple",
	}
	for k, v := range files {
		for _, s := range []certmagic.Storage{a, file} {
			if err := s.Store(ctx, k, []byte(v)); err != nil {
				t.Fatal(err)
			}
		}
	}
	type answer struct {
		Value    string
		Keys     []string
		Exists   bool
		Terminal bool
		Size     int64
		NotExist bool
	}
	ask := func(s certmagic.Storage, op, key string) answer {
		var out answer
		var err error
		switch op {
		case "load":
			var v []byte
			v, err = s.Load(ctx, key)
			out.Value = string(v)
		case "list", "list -r":
			out.Keys, err = s.List(ctx, key, op == "list -r")
			slices.Sort(out.Keys)
		case "exists":
			out.Exists = s.Exists(ctx, key)
		case "stat":
			var ki certmagic.KeyInfo
			ki, err = s.Stat(ctx, key)
			out.Terminal, out.Size = ki.IsTerminal, ki.Size
			if !ki.IsTerminal {
				out.Size = 0 // a directory's size is the file system's business
			}
		}
		out.NotExist = errors.Is(err, fs.ErrNotExist)
		if err != nil && !out.NotExist {
			out.Value = "error"
		}
		return out
	}
	for _, op := range []string{"load", "list", "list -r", "exists", "stat"} {
		for _, key := range []string{"certificates", "certificates/acme-ca/apt.a.test", "certificates/acme-ca/apt.a.test/apt.a.test.crt",
			"certificates/acme-ca/apt.a", "acme", "nothing", "ocsp/apt.a.test-1234"} {
			want, got := ask(file, op, key), ask(b, op, key)
			if op == "load" && want.Value == "error" {
				continue // loading a directory: an error either way, which certmagic never makes
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s %s:\n got  %+v\n want %+v (FileStorage)", op, key, got, want)
			}
		}
	}
	for _, s := range []certmagic.Storage{a, file} {
		if err := s.Delete(ctx, "certificates/acme-ca/apt.a.test"); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := ask(b, "list -r", "certificates"), ask(file, "list -r", "certificates"); !reflect.DeepEqual(got, want) {
		t.Errorf("after a delete: %+v; want %+v", got, want)
	}
	if got := ask(b, "load", "certificates/acme-ca/apt.a.test/apt.a.test.key"); !got.NotExist {
		t.Errorf("a deleted file loads: %+v", got)
	}

	// controld gone: what this edge stored or read is read from its local copy.
	ctl.Stop()
	if v, err := a.Load(ctx, "acme/acme-ca/users/ops@example.org/ops.key"); err != nil || string(v) != "account" {
		t.Fatalf("load with controld down: %q, %v", v, err)
	}
	if v, err := b.Load(ctx, "ocsp/apt.a.test-1234"); err != nil || string(v) != "staple" {
		t.Fatalf("load of a file read before, with controld down: %q, %v", v, err)
	}
	if err := a.Store(ctx, "x/y", []byte("z")); err == nil {
		t.Fatal("store with controld down succeeded: the other edges would not see it")
	}
}

// TestSharedLocks: a lock is one edge's while that edge lives (its keep-alive renews
// it past the TTL), another edge gets it at once when it is freed, and within the TTL
// when its holder dies without freeing it.
func TestSharedLocks(t *testing.T) {
	ctx := context.Background()
	ctl := controldtest.Start(t, store.NewMemory())
	const ttl = 3 * time.Second
	a, b := sharedFor(t, ctl, ttl), sharedFor(t, ctl, ttl)
	if err := a.Lock(ctx, "issue_cert_apt.a.test"); err != nil {
		t.Fatal(err)
	}
	if ok, err := b.TryLock(ctx, "issue_cert_apt.a.test"); err != nil || ok {
		t.Fatalf("TryLock of a held lock: %v %v", ok, err)
	}
	short, cancel := context.WithTimeout(ctx, 2*ttl)
	err := b.Lock(short, "issue_cert_apt.a.test")
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a lock its living holder keeps alive for twice the TTL was taken: %v", err)
	}
	if err := a.RenewLockLease(ctx, "issue_cert_apt.a.test", time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := a.Unlock(ctx, "issue_cert_apt.a.test"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := b.Lock(ctx, "issue_cert_apt.a.test"); err != nil || time.Since(start) > time.Second {
		t.Fatalf("a freed lock taken after %v: %v", time.Since(start), err)
	}

	// b dies holding it: its keep-alive stops, and it frees nothing.
	b.mu.Lock()
	b.held["issue_cert_apt.a.test"]()
	b.mu.Unlock()
	start = time.Now()
	if err := a.Lock(ctx, "issue_cert_apt.a.test"); err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(start); waited > ttl+2*time.Second {
		t.Fatalf("the lock of a dead edge was taken after %v; want within its TTL %v", waited, ttl)
	}
	if err := b.RenewLockLease(ctx, "issue_cert_apt.a.test", time.Minute); err == nil {
		t.Fatal("the dead holder renewed a lock another edge took")
	}
	a.releaseAll()
	if ok, err := b.TryLock(ctx, "issue_cert_apt.a.test"); err != nil || !ok {
		t.Fatalf("after releaseAll: %v %v", ok, err)
	}
}
