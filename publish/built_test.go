package publish_test

// Tests of the build record (WriteBuildRecord): a push of the release a build just made
// on a recorded parent takes the release's new objects from it, asks the store about
// those only and reads no manifest from it; any record it cannot trust is ignored, and
// the push then does what it does without one.

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/armor-apt/armor/controld/client"
	"github.com/armor-apt/armor/internal/testkit/synth"
	"github.com/armor-apt/armor/publish"
	"github.com/armor-apt/armor/store"
	"github.com/armor-apt/armor/store/storetest"
)

// askedStore remembers the digests a push asked the store about (Has) and read (Open).
type askedStore struct {
	*store.Counting
	mu         sync.Mutex
	has, opens map[string]bool
}

func newAskedStore(s store.Store) *askedStore {
	return &askedStore{Counting: store.NewCounting(s), has: map[string]bool{}, opens: map[string]bool{}}
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

// buildRecorded builds the project as armor build does, build record included.
func (p pushProject) buildRecorded(t *testing.T) {
	t.Helper()
	res := p.build(t)
	if err := publish.WriteBuildRecord(p.cache(), res.Manifest, res.Parent, res.Encoded); err != nil {
		t.Fatal(err)
	}
}

// forgetPushes removes the project's record of what it pushed, as on a fresh runner.
func (p pushProject) forgetPushes(t *testing.T) {
	t.Helper()
	state, err := filepath.Glob(filepath.Join(p.cache(), "pushed-*"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range state {
		if err := os.Remove(f); err != nil {
			t.Fatal(err)
		}
	}
}

func (p pushProject) recordPath() string { return filepath.Join(p.cache(), "built") }

// addPackage adds a package named name to the project's inputs, and returns its file.
func (p pushProject) addPackage(t *testing.T, name string) string {
	t.Helper()
	deb, err := synth.WriteOne(filepath.Join(p.dir, "debs"), name, "1.0-1", "amd64", "")
	if err != nil {
		t.Fatal(err)
	}
	return deb
}

// newObjects are the digests a push of the manifest at path must make present that the
// release pushed before (objects before) lacks, its manifest included.
func newObjects(t *testing.T, path string, before map[string]int64) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for sum := range releaseObjects(t, path) {
		if _, ok := before[sum]; !ok {
			out[sum] = true
		}
	}
	return out
}

// TestPushBuildRecord: on a fresh runner (no record of earlier pushes), a push of a
// release built on the active one asks the store about the release's new objects only,
// and with the build record it reads no manifest from the store; a record of another
// manifest, or a damaged one, is ignored, and the push fetches the parent's manifest as
// it does without a record. Every push leaves the whole release in the store and active,
// and pushed again asks the store nothing.
func TestPushBuildRecord(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		// spoil changes the project after its second build, which added the package
		// file deb; the push then cannot use the record.
		spoil func(t *testing.T, p pushProject, deb string)
	}{
		{name: "used"},
		{name: "of another manifest", spoil: func(t *testing.T, p pushProject, deb string) {
			// The record of a build that was replaced by another one, without a
			// record: it lists the other build's new objects.
			rec := readFileT(t, p.recordPath())
			if err := os.Remove(deb); err != nil {
				t.Fatal(err)
			}
			p.addPackage(t, "other")
			p.build(t)
			writeFile(t, p.recordPath(), string(rec))
		}},
		{name: "damaged", spoil: func(t *testing.T, p pushProject, _ string) {
			// A record whose list of new objects lost one (the .deb, which the parent
			// lacks): trusted, it would leave that object out of the store.
			rec := readFileT(t, p.recordPath())
			head, body, _ := bytes.Cut(rec, []byte("\n"))
			var r map[string]any
			if err := json.Unmarshal(body, &r); err != nil {
				t.Fatal(err)
			}
			fresh := r["new"].([]any)
			i := slices.IndexFunc(fresh, func(o any) bool { return filepath.Ext(o.(map[string]any)["path"].(string)) == ".deb" })
			if i < 0 {
				t.Fatalf("the build record lists no new .deb: %s", body)
			}
			r["new"] = slices.Delete(fresh, i, i+1)
			r["objects"] = r["objects"].(float64) - 1
			body, err := json.Marshal(r)
			if err != nil {
				t.Fatal(err)
			}
			writeFile(t, p.recordPath(), string(head)+"\n"+string(body))
		}},
		{name: "truncated", spoil: func(t *testing.T, p pushProject, _ string) {
			rec := readFileT(t, p.recordPath())
			writeFile(t, p.recordPath(), string(rec[:len(rec)-20]))
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			mem := store.NewMemory()
			c, url := newControld(t, mem)
			p := newPushProject(t, "")
			parent := pushTo(t, p, mem, c, url, true)
			first := releaseObjects(t, p.manifestPath())

			deb := p.addPackage(t, "added")
			p.buildRecorded(t)
			if tc.spoil != nil {
				tc.spoil(t, p, deb)
			}
			p.forgetPushes(t)
			want := newObjects(t, p.manifestPath(), first)
			all := releaseObjects(t, p.manifestPath())

			s := newAskedStore(mem)
			res := pushTo(t, p, s, c, url, true)
			if !res.Activated || activeRelease(t, c) != res.Release || res.Parent != parent.Release {
				t.Fatalf("push: %+v; active %s, want it active on %s", res, activeRelease(t, c), parent.Release)
			}
			storetest.CheckHolds(t, mem, all)
			if !maps.Equal(s.has, want) {
				t.Errorf("the push asked the store about %d objects:\n%v\nwant the %d new ones:\n%v", len(s.has), sortedKeys(s.has), len(want), sortedKeys(want))
			}
			u := res.Uploads
			if u.Objects != len(all) || u.Uploaded != len(want) || u.Known != len(all)-len(want) || u.Present != 0 {
				t.Errorf("push stats %+v; want %d objects (the manifest included), %d uploaded, %d known", u, len(all), len(want), len(all)-len(want))
			}
			opened := sortedKeys(s.opens)
			switch {
			case tc.spoil == nil && len(opened) != 0:
				t.Errorf("with the build record the push read %v from the store, want nothing", opened)
			case tc.spoil != nil && !slices.Equal(opened, []string{parent.Manifest}):
				t.Errorf("with a record it cannot use the push read %v from the store, want the parent's manifest %s", opened, parent.Manifest)
			}

			// Pushed again, from the same runner: the pushed state holds the release.
			s.Reset()
			again := pushTo(t, p, s, c, url, true)
			if n := s.Counts(); n.Requests() != 0 || again.Uploads.Known != len(all) {
				t.Errorf("the push of a release pushed from here made %d store requests (%+v), stats %+v; want none, all %d known", n.Requests(), n, again.Uploads, len(all))
			}
		})
	}
}

// TestPushBuildRecordParentNotRecorded: a build record says which objects the release
// adds to its parent, but the others are in the store only if controld recorded the
// parent: a push of a release whose parent was never pushed asks about every object,
// and uploads every one.
func TestPushBuildRecordParentNotRecorded(t *testing.T) {
	t.Parallel()
	mem := store.NewMemory()
	c, url := newControld(t, mem)
	p := newPushProject(t, "")
	// The parent is pushed, to another store that no controld checks.
	push(t, p, store.NewMemory())
	p.forgetPushes(t)
	p.addPackage(t, "added")
	p.buildRecorded(t)
	if _, err := os.Stat(p.recordPath()); err != nil {
		t.Fatalf("no build record: %v", err)
	}
	all := releaseObjects(t, p.manifestPath())

	// A dry run lists every object as missing.
	s := newAskedStore(mem)
	o := p.options(s, 4)
	o.DryRun = true
	o.Controld = &publish.Controld{URL: url, Repo: "test", Activate: true, Client: func() (*client.Client, error) { return c, nil }}
	res, err := publish.Push(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	var would []string
	for _, u := range res.Uploads.WouldUpload {
		would = append(would, u.SHA256)
	}
	slices.Sort(would)
	if wantAll := sortedKeys(all); !slices.Equal(would, wantAll) {
		t.Errorf("dry run would upload %d objects, want all %d of the release:\n%v\nwant\n%v", len(would), len(all), would, wantAll)
	}

	// controld refuses the release (its parent is unknown), once every object is in
	// the store.
	if _, err := pushRecord(p, s, c, url, true); err == nil {
		t.Error("controld recorded a release whose parent it does not know")
	}
	storetest.CheckHolds(t, mem, all)
	if len(s.has) != len(all) {
		t.Errorf("the pushes asked the store about %d objects, want all %d", len(s.has), len(all))
	}
}

// TestWriteBuildRecordNoParent: a release that names no parent, or another than the
// release it was built on, gets no record, and the record of an earlier build goes.
func TestWriteBuildRecordNoParent(t *testing.T) {
	t.Parallel()
	mem := store.NewMemory()
	c, url := newControld(t, mem)
	p := newPushProject(t, "")
	pushTo(t, p, mem, c, url, true)
	p.addPackage(t, "added")
	p.buildRecorded(t)
	if _, err := os.Stat(p.recordPath()); err != nil {
		t.Fatalf("a build on the active release left no record: %v", err)
	}
	// Built on a release built here and never pushed, the next names that release's
	// parent as its own: the objects of the release in between are not in the store.
	p.addPackage(t, "more")
	res := p.build(t)
	if res.Manifest.Parent == res.Parent.ID {
		t.Fatalf("the build named the unpushed release %s as its parent", res.Parent.ID)
	}
	if err := publish.WriteBuildRecord(p.cache(), res.Manifest, res.Parent, res.Encoded); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p.recordPath()); !os.IsNotExist(err) {
		t.Errorf("a build on an unrecorded release left a build record (%v)", err)
	}
}
