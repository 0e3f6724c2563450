package publish_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/armor-apt/armor/internal/lockfile"
	"github.com/armor-apt/armor/internal/testkit/synth"
	"github.com/armor-apt/armor/publish"
	"github.com/armor-apt/armor/store"
)

// TestRecordRolledBack: after a pointer rollback, Record of the rolled-back release
// (its parent is active again) is a *RolledBackError naming it, and activates nothing;
// with Force it is activated.
func TestRecordRolledBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := store.NewMemory()
	c, url := newControld(t, s)
	p := newPushProject(t, "")
	first := pushTo(t, p, s, c, url, true)
	if _, err := synth.WriteOne(filepath.Join(p.dir, "debs"), "added", "1.0-1", "amd64", ""); err != nil {
		t.Fatal(err)
	}
	p.build(t)
	second := pushTo(t, p, s, c, url, true)
	st, err := publish.Previous(ctx, c, "test")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := publish.RollbackPointer(ctx, c, "test", st); err != nil {
		t.Fatal(err)
	}
	o := publish.RecordOptions{URL: url, Repo: "test", Release: second.Release, Parent: second.Parent, Manifest: second.Manifest, Activate: true}
	_, err = publish.Record(ctx, c, o)
	var rb *publish.RolledBackError
	if !errors.As(err, &rb) || rb.RolledBack.Release != second.Release || rb.RolledBack.ReplacedBy != first.Release || rb.Op != publish.OpPush {
		t.Fatalf("Record of the rolled-back release: %v, want a RolledBackError naming it", err)
	}
	var stale *publish.StaleParentError
	if errors.As(err, &stale) {
		t.Errorf("the refusal is also a StaleParentError: %v", err)
	}
	if got := activeRelease(t, c); got != first.Release {
		t.Fatalf("active after the refusal: %s, want %s", got, first.Release)
	}
	o.Force = true
	if activated, err := publish.Record(ctx, c, o); err != nil || !activated || activeRelease(t, c) != second.Release {
		t.Fatalf("Record with Force: %v, %v", activated, err)
	}
}

// TestWriteManifest: the active release's manifest object replaces the local manifest,
// byte for byte; while a build or push holds the repository's lock, it is refused and
// the local manifest stays as it was.
func TestWriteManifest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := store.NewMemory()
	c, url := newControld(t, s)
	p := newPushProject(t, "")
	first := pushTo(t, p, s, c, url, true)
	want, err := publish.FetchObject(ctx, s, first.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := synth.WriteOne(filepath.Join(p.dir, "debs"), "added", "1.0-1", "amd64", ""); err != nil {
		t.Fatal(err)
	}
	p.build(t)
	before, err := os.ReadFile(p.manifestPath())
	if err != nil || bytes.Equal(before, want) {
		t.Fatalf("the second build's manifest: %v", err)
	}

	unlock, err := lockfile.Lock(p.cache(), false)
	if err != nil {
		t.Fatal(err)
	}
	_, err = publish.WriteManifest(ctx, c, s, "test", first.Release, p.manifestPath(), p.cache())
	unlock()
	if err == nil || !strings.Contains(err.Error(), filepath.Join(p.cache(), "lock")) {
		t.Errorf("WriteManifest under a push's lock: %v, want an error naming the lock", err)
	}
	if got, _ := os.ReadFile(p.manifestPath()); !bytes.Equal(got, before) {
		t.Errorf("a refused WriteManifest changed the local manifest")
	}

	m, err := publish.WriteManifest(ctx, c, s, "test", first.Release, p.manifestPath(), p.cache())
	if err != nil || m.ID != first.Release {
		t.Fatalf("WriteManifest: %v, %v", m, err)
	}
	if got, _ := os.ReadFile(p.manifestPath()); !bytes.Equal(got, want) {
		t.Errorf("the local manifest is not the active release's manifest object")
	}
}
