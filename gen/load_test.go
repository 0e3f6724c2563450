package gen_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/armor-apt/armor/gen"
)

// TestChangePlannedWhileFetching: a fresh runner applies its change to the parent's
// manifest while the parent's files are still being fetched from the store, not after.
// Here the store holds every object back until the build has applied the change (or,
// if it never does, for a few seconds); the release is still the one the parent's
// machine makes.
func TestChangePlannedWhileFetching(t *testing.T) {
	r := newRepo(t, repoConfig{Real: true, Synth: 6})
	parent := r.mustBuild().Manifest
	st := storeOf(t, r.Opts.TreeDir, parent)

	f := freshRunner(t, r)
	f.Last = parent
	planned := make(chan struct{})
	var once sync.Once
	var waitedOut atomic.Bool
	f.Opts.Fetch = func(ctx context.Context, sum string, size int64) ([]byte, error) {
		select {
		case <-planned:
		case <-time.After(5 * time.Second):
			waitedOut.Store(true)
		}
		return st.fetch(ctx, sum, size)
	}
	gen.WithFault(&f.Opts, func(step string) error {
		if step == "apply change" {
			once.Do(func() { close(planned) })
		}
		return nil
	})
	newDeb := writeOne(t, f.in("new"), "newpkg", "1.0", "amd64", "")
	got := f.mustBuild()
	if waitedOut.Load() {
		t.Error("the change was applied only once the parent's files were fetched")
	}
	if st.fetched.Load() == 0 {
		t.Fatal("the fresh runner fetched nothing from the store")
	}
	copyFile(t, newDeb, r.in("newpkg_1.0_amd64.deb"))
	assertSameRelease(t, got.Manifest, r.mustBuild().Manifest)
}
