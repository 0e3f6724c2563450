package bolt_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/armor-apt/armor/controld/state"
	"github.com/armor-apt/armor/controld/state/bolt"
	"github.com/armor-apt/armor/controld/state/statetest"
)

func open(t *testing.T) state.Store {
	t.Helper()
	st, err := bolt.Open(filepath.Join(t.TempDir(), "controld.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := st.Check(context.Background()); err != nil {
			t.Errorf("check: %v", err)
		}
		st.Close()
	})
	return st
}

func TestSuite(t *testing.T) { statetest.Run(t, open) }

func TestLocked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "controld.db")
	st, err := bolt.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	_, err = bolt.Open(path, &bolt.Options{LockTimeout: 50 * time.Millisecond})
	if !errors.Is(err, bolt.ErrLocked) {
		t.Errorf("second open: %v, want ErrLocked", err)
	}
}

func TestReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "controld.db")
	st, err := bolt.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.CreateRepository(ctx, state.Repository{Name: "a", Hostnames: []string{"a.test"}}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	st, err = bolt.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	r, err := st.Repository(ctx, "a")
	if err != nil || len(r.Hostnames) != 1 {
		t.Fatalf("after reopen: %+v, %v", r, err)
	}
	if v, _ := st.Version(ctx); v != 2 {
		t.Errorf("version after reopen = %d, want 2", v)
	}
}
