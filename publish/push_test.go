package publish_test

// Tests of the push workflow against a local directory store and a real S3 server on
// loopback (cmd/s3server), on a release built by gen: what an incremental push uploads
// and how many store requests it makes, and resuming a killed push.

import (
	"context"
	"crypto"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/armor-apt/armor/debian/sign"
	"github.com/armor-apt/armor/gen"
	"github.com/armor-apt/armor/internal/atomicfile"
	"github.com/armor-apt/armor/internal/testkit/s3test"
	"github.com/armor-apt/armor/internal/testkit/synth"
	"github.com/armor-apt/armor/manifest"
	"github.com/armor-apt/armor/publish"
	"github.com/armor-apt/armor/store"
	"github.com/armor-apt/armor/store/storetest"
)

const (
	testKey           = "../testdata/keys/eddsa.sec.asc" // fixed, not encrypted
	testPackagesCount = 20
)

// pushProject is a built repository, laid out as armor init lays it out, and the store
// it pushes to.
type pushProject struct {
	dir, remote string
}

func (p pushProject) manifestPath() string { return filepath.Join(p.dir, "manifest.toml") }
func (p pushProject) tree() string         { return filepath.Join(p.dir, "public") }
func (p pushProject) cache() string        { return filepath.Join(p.dir, ".armor", "cache") }

// newPushProject writes testPackagesCount synthetic packages and builds them, in two
// architectures, for a push to remote.
func newPushProject(t *testing.T, remote string) pushProject {
	t.Helper()
	p := pushProject{dir: t.TempDir(), remote: remote}
	if _, err := synth.Write(filepath.Join(p.dir, "debs"), synth.Options{N: testPackagesCount, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	p.build(t)
	return p
}

// build builds the project's tree and writes its manifest, as armor build does.
func (p pushProject) build(t *testing.T) *gen.Result {
	t.Helper()
	f, err := os.Open(testKey)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	key, err := sign.ReadSecretKey(f, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := gen.Build(context.Background(), gen.Options{
		Repository: "test", Origin: "Armor Test",
		Suites: []gen.Suite{{
			Codename: "stable", Components: []string{"main"}, Architectures: []string{"amd64", "arm64"},
			Inputs: map[string][]string{"main": {"debs/*.deb"}},
			// The tests change a release by changing debs/: the suite mirrors it.
			Sync: true, MaxRemovals: 1,
		}},
		BaseDir: p.dir, TreeDir: p.tree(), CacheDir: p.cache(),
		LoadPrevious: func() (*manifest.Manifest, error) {
			m, err := manifest.Load(p.manifestPath())
			if errors.Is(err, os.ErrNotExist) {
				return nil, nil
			}
			return m, err
		},
		Key: key, Hash: crypto.SHA512, Date: time.Now().UTC().Truncate(time.Second),
	})
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	if !res.UpToDate {
		if err := atomicfile.WriteFile(p.manifestPath(), res.Encoded, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return res
}

// options are the options of a push of the project to s.
func (p pushProject) options(s store.Store, jobs int) publish.PushOptions {
	return publish.PushOptions{Manifest: p.manifestPath(), Tree: p.tree(), Cache: p.cache(), Store: s, Jobs: jobs}
}

// openStore opens the project's store the way push does, counted.
func (p pushProject) openStore(t *testing.T) *store.Counting {
	t.Helper()
	s, err := store.OpenRclone(context.Background(), p.remote)
	if err != nil {
		t.Fatal(err)
	}
	return store.NewCounting(s)
}

func loadManifest(t *testing.T, path string) *manifest.Manifest {
	t.Helper()
	m, err := manifest.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func readFileT(t *testing.T, p string) []byte {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// recorder remembers which objects Put was asked for, and which it created.
type recorder struct {
	store.Store
	mu      sync.Mutex
	puts    map[string]bool // sum -> created
	onPut   func(n int64)   // called after every Put with the number of Puts so far
	putsRun atomic.Int64
}

func newRecorder(s store.Store) *recorder { return &recorder{Store: s, puts: map[string]bool{}} }

func (r *recorder) Put(ctx context.Context, sum string, size int64, rd io.Reader) (bool, error) {
	created, err := r.Store.Put(ctx, sum, size, rd)
	r.mu.Lock()
	if err == nil {
		r.puts[sum] = created
	}
	r.mu.Unlock()
	if n := r.putsRun.Add(1); r.onPut != nil {
		r.onPut(n)
	}
	return created, err
}

// created returns the digests the recorder's Puts stored.
func (r *recorder) created() map[string]bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]bool{}
	for s, c := range r.puts {
		if c {
			out[s] = true
		}
	}
	return out
}

func (r *recorder) putAsked() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Sorted(maps.Keys(r.puts))
}

// releaseObjects are the digests a push of the manifest at path must make present: the
// release's objects and the manifest itself.
func releaseObjects(t *testing.T, path string) map[string]int64 {
	t.Helper()
	data := readFileT(t, path)
	m, err := manifest.Parse(data, path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, o := range m.Objects() {
		out[o.SHA256] = o.Size
	}
	sum := sha256.Sum256(data)
	out[hex.EncodeToString(sum[:])] = int64(len(data))
	return out
}

func push(t *testing.T, p pushProject, s store.Store) *publish.PushResult {
	t.Helper()
	res, err := publish.Push(context.Background(), p.options(s, 4))
	if err != nil {
		t.Fatalf("push: %v", err)
	}
	return res
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

// pathsOf lists the paths of manifest m served as each of the digests.
func pathsOf(m *manifest.Manifest, sums map[string]bool) []string {
	var out []string
	for p, o := range m.Paths() {
		if sums[o.SHA256] {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}

// TestPushIncremental: an unchanged release uploads nothing (and, with the pushed state,
// asks the store nothing); one added package uploads exactly the new objects.
func TestPushIncremental(t *testing.T) {
	t.Parallel()
	for _, kind := range s3test.StoreKinds(t) {
		t.Run(kind.Name, func(t *testing.T) {
			p := newPushProject(t, kind.Remote(t))
			cas := p.openStore(t)
			first := releaseObjects(t, p.manifestPath())

			res := push(t, p, cas)
			if res.Uploads.Uploaded != len(first) || res.Uploads.Objects != len(first) || res.Uploads.Present != 0 || res.Uploads.Known != 0 {
				t.Errorf("first push: %+v, want %d objects uploaded", res, len(first))
			}
			storetest.CheckHolds(t, cas, first)

			// Unchanged, with the pushed state: no request at all.
			cas.Reset()
			res = push(t, p, cas)
			if res.Uploads.Uploaded != 0 || res.Uploads.Known != len(first) {
				t.Errorf("unchanged push: %+v, want 0 uploaded, %d known", res, len(first))
			}
			if c := cas.Counts(); c.Requests() != 0 {
				t.Errorf("unchanged push with the pushed state made %d store requests (%+v), want 0", c.Requests(), c)
			}

			// Unchanged, without the pushed state: one existence check per object, no upload.
			state, err := filepath.Glob(filepath.Join(p.dir, ".armor", "cache", "pushed-*.toml"))
			if err != nil || len(state) != 1 {
				t.Fatalf("pushed state files: %v %v", state, err)
			}
			if err := os.Remove(state[0]); err != nil {
				t.Fatal(err)
			}
			cas.Reset()
			res = push(t, p, cas)
			if c := cas.Counts(); res.Uploads.Uploaded != 0 || res.Uploads.Present != len(first) || c.Put != 0 || c.Has != int64(len(first)) {
				t.Errorf("unchanged push without the pushed state: %+v, counts %+v; want %d checks and no upload", res, c, len(first))
			}

			// One package added to the amd64 index.
			old := loadManifest(t, p.manifestPath())
			deb, err := synth.WriteOne(filepath.Join(p.dir, "debs"), "added", "1.0-1", "amd64", "")
			if err != nil {
				t.Fatal(err)
			}
			p.build(t)
			nu := loadManifest(t, p.manifestPath())
			second := releaseObjects(t, p.manifestPath())
			want := map[string]bool{}
			for sum := range second {
				if _, ok := first[sum]; !ok {
					want[sum] = true
				}
			}
			// What changed, by path: the .deb, the amd64 index in three forms and the
			// amd64 Contents in two (and their by-hash names), Release and its two
			// signatures, and the manifest itself.
			paths := pathsOf(nu, want)
			byHash := 0
			for _, path := range paths {
				if strings.Contains(path, "/by-hash/") {
					byHash++
					if !strings.Contains(path, "/binary-amd64/") && !strings.HasPrefix(path, "dists/stable/main/by-hash/") {
						t.Errorf("new by-hash object outside binary-amd64 and main's Contents: %s", path)
					}
				}
			}
			wantPaths := []string{
				"dists/stable/InRelease", "dists/stable/Release", "dists/stable/Release.gpg",
				"dists/stable/main/Contents-amd64.gz",
				"dists/stable/main/binary-amd64/Packages.gz",
				"dists/stable/main/binary-amd64/Packages.xz", "pool/main/a/added/" + filepath.Base(deb),
			}
			var plain []string
			for _, path := range paths {
				if !strings.Contains(path, "/by-hash/") {
					plain = append(plain, path)
				}
			}
			if !slices.Equal(plain, wantPaths) || byHash == 0 {
				t.Errorf("new objects are served at %v (%d by-hash), want %v and their by-hash names", plain, byHash, wantPaths)
			}
			if len(want) != len(wantPaths)+1 {
				t.Errorf("%d new objects, want %d (the paths above and the manifest)", len(want), len(wantPaths)+1)
			}

			rec := newRecorder(cas)
			cas.Reset()
			res = push(t, p, rec)
			got := rec.created()
			if !maps.Equal(got, want) {
				t.Errorf("push after adding one package uploaded %d objects:\n%v\nwant %d:\n%v\n(old manifest %s, new %s)",
					len(got), sortedKeys(got), len(want), sortedKeys(want), old.ID, nu.ID)
			}
			if asked := rec.putAsked(); len(asked) != len(want) {
				t.Errorf("Put was called for %d objects, want %d", len(asked), len(want))
			}
			c := cas.Counts()
			t.Logf("one package added: %d of %d objects new, %d store requests (%+v)", len(want), len(second), c.Requests(), c)
			if limit := int64(2*len(want) + 2); c.Requests() > limit {
				t.Errorf("push after adding one package made %d store requests (%+v), want at most %d (2 per changed object + 2)", c.Requests(), c, limit)
			}
			if res.Uploads.Uploaded != len(want) || res.Uploads.Known != len(second)-len(want) {
				t.Errorf("push result %+v: want %d uploaded, %d known", res, len(want), len(second)-len(want))
			}
			storetest.CheckHolds(t, cas, second)
		})
	}
}

// cancelAfterPuts records Puts and cancels a push's context once n of them have
// finished.
func cancelAfterPuts(s store.Store, n int64, cancel func()) *recorder {
	r := newRecorder(s)
	r.onPut = func(done int64) {
		if done == n {
			cancel()
		}
	}
	return r
}

// TestPushResumes: a push killed midway leaves the store consistent, and the next push
// uploads only what did not arrive.
func TestPushResumes(t *testing.T) {
	t.Parallel()
	for _, kind := range s3test.StoreKinds(t) {
		t.Run(kind.Name, func(t *testing.T) {
			p := newPushProject(t, kind.Remote(t))
			cas := p.openStore(t)
			all := releaseObjects(t, p.manifestPath())
			const killAfter = 5

			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			killed := cancelAfterPuts(cas, killAfter, cancel)
			res, err := publish.Push(ctx, p.options(killed, 2))
			if err == nil {
				t.Fatalf("a push cancelled after %d puts succeeded: %+v", killAfter, res)
			}
			if !strings.Contains(err.Error(), "canceled") {
				t.Errorf("killed push: %v, want a cancellation", err)
			}
			// What the killed push saw created is there; an upload cut off by the
			// cancellation may also have completed on the server: ask the store.
			arrived := killed.created()
			// The S3 server may finish an upload whose client was cancelled a moment
			// later: read what the store holds until two looks agree.
			scan := func() map[string]int64 {
				held := map[string]int64{}
				for sum, size := range all {
					ok, err := cas.Has(context.Background(), sum)
					if err != nil {
						t.Fatal(err)
					}
					if ok {
						held[sum] = size
					}
				}
				return held
			}
			present := scan()
			for range 20 {
				time.Sleep(100 * time.Millisecond)
				next := scan()
				if len(next) == len(present) {
					break
				}
				present = next
			}
			for sum := range arrived {
				if _, ok := present[sum]; !ok {
					t.Errorf("Put reported %s created, but the store does not have it", sum)
				}
			}
			if len(arrived) < killAfter-1 || len(present) >= len(all) {
				t.Fatalf("the killed push stored %d (saw %d created) of %d objects", len(present), len(arrived), len(all))
			}
			storetest.CheckHolds(t, cas, present)
			state, _ := filepath.Glob(filepath.Join(p.dir, ".armor", "cache", "pushed-*.toml"))
			if len(state) != 0 {
				t.Errorf("a killed push wrote the pushed state %v", state)
			}
			// The manifest goes last: the store does not hold it yet.
			mdata := readFileT(t, p.manifestPath())
			msum := sha256.Sum256(mdata)
			if _, ok := present[hex.EncodeToString(msum[:])]; ok {
				t.Error("after a killed push the store has the manifest")
			}

			resumed := newRecorder(cas)
			res = push(t, p, resumed)
			again := resumed.created()
			for _, sum := range resumed.putAsked() {
				if _, ok := present[sum]; ok {
					t.Errorf("the resumed push called Put for %s, which was present", sum)
				}
			}
			if len(present)+len(again) != len(all) || res.Uploads.Uploaded != len(again) || res.Uploads.Present != len(present) {
				t.Errorf("resumed push uploaded %d, %d were present, of %d objects; result %+v", len(again), len(present), len(all), res)
			}
			storetest.CheckHolds(t, cas, all)
			if kind.Name == "local" {
				if tmp, _ := os.ReadDir(filepath.Join(p.remote, "tmp")); len(tmp) != 0 {
					t.Errorf("the local store keeps %d temporary uploads", len(tmp))
				}
			}
		})
	}
}

// TestPushStateUnwritable: the pushed state is a cache: a push that cannot write it
// (here a directory is in its place) still succeeds, and the next push, which cannot
// read it, asks the store about every object.
func TestPushStateUnwritable(t *testing.T) {
	t.Parallel()
	p := newPushProject(t, "")
	s := store.NewCounting(store.NewMemory())
	push(t, p, s)
	state, err := filepath.Glob(filepath.Join(p.cache(), "pushed-*.toml"))
	if err != nil || len(state) != 1 {
		t.Fatalf("pushed state files: %v %v", state, err)
	}
	if err := os.Remove(state[0]); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(state[0], "in-the-way"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := synth.WriteOne(filepath.Join(p.dir, "debs"), "added", "1.0-1", "amd64", ""); err != nil {
		t.Fatal(err)
	}
	p.build(t)
	all := releaseObjects(t, p.manifestPath())
	s.Reset()
	res, err := publish.Push(context.Background(), p.options(s, 4))
	if err != nil {
		t.Fatalf("a push that could not write its pushed state failed: %v", err)
	}
	storetest.CheckHolds(t, s, all)
	if n := s.Counts(); n.Has != int64(len(all)) || res.Uploads.Known != 0 {
		t.Errorf("without a readable pushed state the push made %+v, stats %+v; want %d checks, none known", n, res.Uploads, len(all))
	}
}
