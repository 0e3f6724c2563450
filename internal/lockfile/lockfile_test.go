package lockfile_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/armor-apt/armor/internal/lockfile"
)

// TestLock: one exclusive holder, or any number of shared ones; a conflicting Lock fails
// at once and names the lock file; releasing makes the lock free again.
func TestLock(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cache")
	path := filepath.Join(dir, "lock")
	mustLock := func(exclusive bool) func() {
		t.Helper()
		unlock, err := lockfile.Lock(dir, exclusive)
		if err != nil {
			t.Fatalf("Lock(exclusive=%v): %v", exclusive, err)
		}
		return unlock
	}
	refused := func(exclusive bool) {
		t.Helper()
		unlock, err := lockfile.Lock(dir, exclusive)
		if err == nil {
			unlock()
			t.Fatalf("Lock(exclusive=%v) succeeded against a conflicting holder", exclusive)
		}
		if !strings.Contains(err.Error(), path) {
			t.Errorf("error does not name %s: %v", path, err)
		}
	}

	unlock := mustLock(true)
	refused(true)
	refused(false)
	unlock()

	unlockA, unlockB := mustLock(false), mustLock(false)
	refused(true)
	unlockA()
	refused(true)
	unlockB()
	mustLock(true)()

	// A builder's umask does not lock readers out.
	fresh := filepath.Join(t.TempDir(), "cache")
	old := syscall.Umask(0o077)
	unlock, err := lockfile.Lock(fresh, true)
	syscall.Umask(old)
	if err != nil {
		t.Fatal(err)
	}
	unlock()
	if fi, err := os.Stat(filepath.Join(fresh, "lock")); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("lock file made under umask 077: %v; want mode 0644", err)
		if err == nil {
			t.Errorf("mode %v", fi.Mode())
		}
	}

	// A cache directory that cannot exist: both modes fail, naming the lock file.
	blocked := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(blocked, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, exclusive := range []bool{true, false} {
		if _, err := lockfile.Lock(filepath.Join(blocked, "cache"), exclusive); err == nil || !strings.Contains(err.Error(), filepath.Join(blocked, "cache", "lock")) {
			t.Errorf("Lock(exclusive=%v) under a file: %v; want an error naming the lock", exclusive, err)
		}
	}
}
