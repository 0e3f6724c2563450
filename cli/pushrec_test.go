package cli

import (
	"context"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/armor-apt/armor/internal/testkit/synth"
	"github.com/armor-apt/armor/store"
)

// askedStore counts a store's requests and remembers which objects Has and Open were
// asked for.
type askedStore struct {
	*store.Counting
	mu         sync.Mutex
	has, opens map[string]bool
}

func (a *askedStore) Has(ctx context.Context, sum string) (bool, error) {
	a.mu.Lock()
	a.has[sum] = true
	a.mu.Unlock()
	return a.Counting.Has(ctx, sum)
}

func (a *askedStore) Open(ctx context.Context, sum string, offset, length int64) (io.ReadCloser, error) {
	a.mu.Lock()
	a.opens[sum] = true
	a.mu.Unlock()
	return a.Counting.Open(ctx, sum, offset, length)
}

// TestColdRunnerPushUsesBuildRecord: on a runner that starts with only the checkout and
// one new .deb, armor build leaves the record of what its release adds to the active
// one, and armor push then reads no manifest from the store (neither the parent's nor
// anything else): it asks the store about the new objects only, and uploads each.
func TestColdRunnerPushUsesBuildRecord(t *testing.T) {
	site := newControldSite(t)
	ws := site.project(t)
	armorOK(t, "-c", ws.cfg, "repos", "create")
	if _, err := runPush(context.Background(), ws.cfg, pushOptions{Activate: true}); err != nil {
		t.Fatal(err)
	}
	before := releaseObjects(t, filepath.Join(ws.dir, testManifestName))

	runner := t.TempDir()
	for _, f := range []string{testConfigName, testManifestName} {
		if err := os.WriteFile(filepath.Join(runner, f), readFileT(t, filepath.Join(ws.dir, f)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(runner, "debs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := synth.WriteOne(filepath.Join(runner, "debs"), "coldpkg", "1.0-1", "amd64", ""); err != nil {
		t.Fatal(err)
	}
	rc, err := store.OpenRclone(context.Background(), site.remote)
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(runner, testConfigName)
	b, err := runBuild(context.Background(), cfg, buildOptions{Store: rc})
	if err != nil {
		t.Fatalf("cold build: %v", err)
	}
	if _, err := os.Stat(filepath.Join(runner, ".armor", "cache", "built")); err != nil {
		t.Errorf("the build left no build record: %v", err)
	}

	s := &askedStore{Counting: store.NewCounting(rc), has: map[string]bool{}, opens: map[string]bool{}}
	res, err := runPush(context.Background(), cfg, pushOptions{Activate: true, Store: s})
	if err != nil {
		t.Fatalf("cold push: %v", err)
	}
	if got := site.active(t); got != b.Release || !res.Activated {
		t.Fatalf("active %s, want the cold runner's %s", got, b.Release)
	}
	added := map[string]bool{}
	for sum := range releaseObjects(t, filepath.Join(runner, testManifestName)) {
		if _, ok := before[sum]; !ok {
			added[sum] = true
		}
	}
	c := s.Counts()
	t.Logf("cold push: %d new objects, store requests %+v", len(added), c)
	if len(s.opens) != 0 {
		t.Errorf("the cold push read %v from the store, want nothing", slices.Sorted(maps.Keys(s.opens)))
	}
	if !maps.Equal(s.has, added) {
		t.Errorf("the cold push asked the store about %v, want the %d new objects %v", slices.Sorted(maps.Keys(s.has)), len(added), slices.Sorted(maps.Keys(added)))
	}
	if want := int64(2 * len(added)); c.Requests() != want || c.Put != int64(len(added)) {
		t.Errorf("the cold push made %d store requests (%+v), want %d: a check and an upload of each new object", c.Requests(), c, want)
	}
}
