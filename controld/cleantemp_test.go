package controld_test

import (
	"context"
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/armor-apt/armor/controld"
	"github.com/armor-apt/armor/controld/state/bolt"
	"github.com/armor-apt/armor/store"
)

// TestServeCleansInterruptedUploads: a serving controld removes from a local-directory
// store the temporary upload a killed push left a day ago, and keeps one in progress.
func TestServeCleansInterruptedUploads(t *testing.T) {
	dir := t.TempDir()
	storeDir := filepath.Join(dir, "store")
	stale := filepath.Join(storeDir, "tmp", "killed-push-upload")
	fresh := filepath.Join(storeDir, "tmp", "upload-in-progress")
	for _, p := range []string{stale, fresh} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("part of an object"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-25 * time.Hour)
	if err := os.Chtimes(stale, old, old); err != nil {
		t.Fatal(err)
	}
	rc, err := store.OpenRclone(context.Background(), storeDir)
	if err != nil {
		t.Fatal(err)
	}
	st, err := bolt.Open(filepath.Join(dir, controld.DBFile), &bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	srv, err := controld.NewServer(controld.Config{}, rc, st)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()
	defer func() {
		cancel()
		<-served
	}()

	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := os.Stat(stale)
		if errors.Is(err, fs.ErrNotExist) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the day-old temporary upload %s is still in the store 10 s after controld started (stat: %v)", stale, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Errorf("the upload in progress was removed: %v", err)
	}
}
