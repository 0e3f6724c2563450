package store_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/armor-apt/armor/store"
	"github.com/armor-apt/armor/store/storetest"
)

func TestMemory(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) store.Store { return store.NewMemory() })
}

func TestWrappers(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) store.Store {
		return store.WithRetry(store.WithLimit(store.NewCounting(store.NewMemory()), 2), 3, time.Millisecond)
	})
}

func openLocal(t *testing.T, dir string) *store.Rclone {
	t.Helper()
	s, err := store.OpenRclone(context.Background(), dir)
	if err != nil {
		t.Fatalf("OpenRclone(%s) = %v", dir, err)
	}
	return s
}

func TestRcloneLocal(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) store.Store {
		dir := t.TempDir()
		s := openLocal(t, dir)
		t.Cleanup(func() { assertNoTemp(t, dir) })
		return s
	})
}

// assertNoTemp checks that no temporary upload was left behind in a local store.
func assertNoTemp(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(dir, "tmp"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	for _, e := range entries {
		t.Errorf("temporary upload left behind: tmp/%s", e.Name())
	}
}

func TestRcloneLocalLayout(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := openLocal(t, dir)
	o := storetest.NewObject([]byte("where does it go?"))
	storetest.Put(t, s, o)
	got, err := os.ReadFile(filepath.Join(dir, "objects", "sha256", o.Sum[:2], o.Sum))
	if err != nil || string(got) != string(o.Data) {
		t.Fatalf("object file = %q, %v; want %q at objects/sha256/%s/%s", got, err, o.Data, o.Sum[:2], o.Sum)
	}
	if s.String() != dir {
		t.Errorf("String() = %q, want %q", s.String(), dir)
	}
}

func TestRcloneRelativePath(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	s := openLocal(t, "./store")
	o := storetest.NewObject([]byte("relative"))
	storetest.Put(t, s, o)
	if _, err := os.Stat(filepath.Join(dir, "store", store.ObjectPath(o.Sum))); err != nil {
		t.Fatalf("object not under ./store: %v", err)
	}
}

// TestRcloneConfiguredRemotes uses remotes named in rclone.conf and in environment
// variables. rclone's config file is installed once per process, so this is the only
// test that names configured remotes.
func TestRcloneConfiguredRemotes(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "rclone.conf")
	if err := os.WriteFile(conf, []byte("[armorconf]\ntype = local\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("RCLONE_CONFIG", conf)
	t.Setenv("RCLONE_CONFIG_ARMORENV_TYPE", "local")
	for _, name := range []string{"armorconf", "armorenv"} {
		t.Run(name, func(t *testing.T) {
			root := filepath.Join(dir, name)
			s := openLocal(t, name+":"+root)
			o := storetest.NewObject([]byte(name))
			storetest.Put(t, s, o)
			if _, err := os.Stat(filepath.Join(root, store.ObjectPath(o.Sum))); err != nil {
				t.Fatalf("object not under %s: %v", root, err)
			}
			if want := name + ":" + root; s.String() != want {
				t.Errorf("String() = %q, want %q", s.String(), want)
			}
		})
	}
	t.Run("configured with a backend this build lacks", func(t *testing.T) {
		t.Setenv("RCLONE_CONFIG_ARMORGCS_TYPE", "gcs")
		_, err := store.OpenRclone(context.Background(), "armorgcs:bucket/x")
		if !errors.Is(err, store.ErrBackendMissing) || !strings.Contains(err.Error(), `"gcs"`) {
			t.Fatalf("OpenRclone of a configured gcs remote = %v; want ErrBackendMissing naming gcs", err)
		}
	})
	t.Run("unconfigured", func(t *testing.T) {
		_, err := store.OpenRclone(context.Background(), "armor-test-unconfigured:bucket/x")
		if err == nil || !strings.Contains(err.Error(), "armor-test-unconfigured") || !strings.Contains(err.Error(), "rclone config") {
			t.Fatalf("OpenRclone of an unconfigured remote = %v; want an error naming it and rclone config", err)
		}
	})
}

func TestOpenRcloneErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, remote string
		want         []string // substrings of the error
	}{
		{"unknown backend", ":nosuchbackend:bucket", []string{"open store", "nosuchbackend"}},
		{"is a file", file, []string{file, "not a directory"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := store.OpenRclone(context.Background(), tc.remote)
			if err == nil {
				t.Fatalf("OpenRclone(%q) succeeded", tc.remote)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestRcloneCleanTemp(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := openLocal(t, dir)
	ctx := context.Background()
	if n, err := s.CleanTemp(ctx, time.Hour); n != 0 || err != nil {
		t.Fatalf("CleanTemp without tmp/ = %d, %v", n, err)
	}
	tmp := filepath.Join(dir, "tmp")
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	old, fresh := filepath.Join(tmp, "old.1234"), filepath.Join(tmp, "fresh.5678")
	for _, p := range []string{old, fresh} {
		if err := os.WriteFile(p, []byte("partial"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	past := time.Now().Add(-2 * time.Hour)
	if err := os.Chtimes(old, past, past); err != nil {
		t.Fatal(err)
	}
	if n, err := s.CleanTemp(ctx, time.Hour); n != 1 || err != nil {
		t.Fatalf("CleanTemp = %d, %v; want 1 removed", n, err)
	}
	if _, err := os.Stat(old); !os.IsNotExist(err) {
		t.Errorf("old temporary upload still there: %v", err)
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Errorf("fresh temporary upload removed: %v", err)
	}
}

// List reports objects only: temporary uploads and stray names under objects/ are not
// objects, and a garbage collector must not count or delete them.
func TestRcloneListSkipsNonObjects(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := openLocal(t, dir)
	o := storetest.NewObject([]byte("the one object"))
	storetest.Put(t, s, o)
	other := storetest.NewObject([]byte("misplaced"))
	for _, p := range []string{
		"tmp/" + o.Sum + ".1234",
		"objects/sha256/ab/not-a-digest",
		"objects/sha256/00/" + other.Sum, // a digest under the wrong prefix
		"README",
	} {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got := storetest.List(t, s)
	if len(got) != 1 || got[o.Sum].Size != int64(len(o.Data)) {
		t.Fatalf("List = %v, want only %s", got, o.Sum)
	}
}
