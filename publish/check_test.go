package publish_test

// Tests of the store check against a local directory store and a real S3 server on
// loopback: two releases pushed and recorded in a real controld, then objects deleted,
// shortened or overwritten directly in the store's directory.

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/armor-apt/armor/controld/client"
	"github.com/armor-apt/armor/internal/testkit/s3test"
	"github.com/armor-apt/armor/manifest"
	"github.com/armor-apt/armor/publish"
	"github.com/armor-apt/armor/store"
	"github.com/rclone/rclone/fs"
	"github.com/rclone/rclone/fs/object"
)

// checkStore makes a fresh, empty store and a way to damage it behind armor's back.
type checkStore struct {
	name string
	open func(t *testing.T) (store.Store, damager)
}

// damager removes and rewrites objects of a store without going through armor's store,
// which refuses bytes that do not match their digest.
type damager interface {
	remove(t *testing.T, sum string)
	write(t *testing.T, sum string, data []byte)
}

func checkStores(t *testing.T) []checkStore {
	t.Helper()
	srv := s3test.Start(t)
	var n atomic.Int64
	return []checkStore{
		{"local", func(t *testing.T) (store.Store, damager) {
			dir := t.TempDir()
			return openLocal(t, dir), dirDamager(dir)
		}},
		{"s3", func(t *testing.T) (store.Store, damager) {
			prefix := fmt.Sprintf("check%d", n.Add(1))
			return openS3(t, srv, prefix), newS3Damager(t, srv.Remote("armor", prefix))
		}},
	}
}

// dirDamager changes the files of a store in a local directory.
type dirDamager string

func (d dirDamager) file(sum string) string {
	return filepath.Join(string(d), filepath.FromSlash(store.ObjectPath(sum)))
}

func (d dirDamager) remove(t *testing.T, sum string) {
	t.Helper()
	if err := os.Remove(d.file(sum)); err != nil {
		t.Fatal(err)
	}
}

func (d dirDamager) write(t *testing.T, sum string, data []byte) {
	t.Helper()
	if err := os.WriteFile(d.file(sum), data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// s3Damager changes the objects of a store on the S3 server through plain S3 requests:
// the server (rclone serve s3) caches its directory, so it would not see files changed
// under it.
type s3Damager struct{ f fs.Fs }

func newS3Damager(t *testing.T, remote string) s3Damager {
	t.Helper()
	f, err := fs.NewFs(context.Background(), remote)
	if err != nil {
		t.Fatal(err)
	}
	return s3Damager{f}
}

func (d s3Damager) remove(t *testing.T, sum string) {
	t.Helper()
	o, err := d.f.NewObject(context.Background(), store.ObjectPath(sum))
	if err == nil {
		err = o.Remove(context.Background())
	}
	if err != nil {
		t.Fatal(err)
	}
}

func (d s3Damager) write(t *testing.T, sum string, data []byte) {
	t.Helper()
	info := object.NewStaticObjectInfo(store.ObjectPath(sum), time.Now(), int64(len(data)), true, nil, d.f)
	if _, err := d.f.Put(context.Background(), bytes.NewReader(data), info); err != nil {
		t.Fatal(err)
	}
}

// checkFixture is two releases pushed to a store and recorded in controld, the second
// adding one package to the first.
type checkFixture struct {
	s        store.Store
	damage   damager
	c        *client.Client
	p        pushProject
	r1, r2   *publish.PushResult
	m1, m2   *manifest.Manifest
	releases []publish.CheckRelease
}

func newCheckFixture(t *testing.T, k checkStore) *checkFixture {
	t.Helper()
	f := &checkFixture{}
	f.s, f.damage = k.open(t)
	c, url := newControld(t, f.s)
	f.c = c
	f.p = newPushProject(t, "")
	f.r1 = pushTo(t, f.p, f.s, c, url, true)
	f.m1 = loadManifest(t, f.p.manifestPath())
	f.m2 = f.p.add(t, "added")
	f.r2 = pushTo(t, f.p, f.s, c, url, true)
	rels, err := publish.ReleasesToCheck(context.Background(), c, "test", "", false)
	if err != nil {
		t.Fatalf("ReleasesToCheck: %v", err)
	}
	f.releases = rels
	return f
}

func (f *checkFixture) remove(t *testing.T, sum string) {
	t.Helper()
	f.damage.remove(t, sum)
}

// overwrite replaces the object's bytes with size other bytes.
func (f *checkFixture) overwrite(t *testing.T, sum string, size int64) {
	t.Helper()
	f.damage.write(t, sum, bytes.Repeat([]byte("x"), int(size)))
}

func (f *checkFixture) check(t *testing.T, readData bool) *publish.CheckReport {
	t.Helper()
	r, err := publish.Check(context.Background(), publish.CheckOptions{Store: f.s, Releases: f.releases, ReadData: readData, Jobs: 4})
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	return r
}

// pkg returns the package named name in m.
func pkg(t *testing.T, m *manifest.Manifest, name string) manifest.Package {
	t.Helper()
	i := slices.IndexFunc(m.Packages, func(p manifest.Package) bool { return p.Name == name })
	if i < 0 {
		t.Fatalf("no package %s in release %s", name, m.ID)
	}
	return m.Packages[i]
}

// problemLines renders problems one a line, for comparison.
func problemLines(ps []publish.Problem) []string {
	var out []string
	for _, p := range ps {
		var uses []string
		for _, u := range p.Uses {
			uses = append(uses, u.Release[:8]+":"+u.Path)
		}
		out = append(out, fmt.Sprintf("%s %s size=%d got=%d %s", p.Kind, p.SHA256[:12], p.Size, p.GotSize, strings.Join(uses, ",")))
	}
	slices.Sort(out)
	return out
}

func line(kind, sum string, size, got int64, uses ...string) string {
	return fmt.Sprintf("%s %s size=%d got=%d %s", kind, sum[:12], size, got, strings.Join(uses, ","))
}

func use(release, path string) string { return release[:8] + ":" + path }

func assertProblems(t *testing.T, what string, r *publish.CheckReport, want ...string) {
	t.Helper()
	got := problemLines(r.Problems)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("%s: problems:\n got  %q\n want %q", what, got, want)
	}
}

// distinctObjects counts the distinct objects of ms and their bytes.
func distinctObjects(ms ...*manifest.Manifest) (int, int64) {
	seen := map[string]bool{}
	var n int64
	for _, m := range ms {
		for _, o := range m.Objects() {
			if !seen[o.SHA256] {
				seen[o.SHA256] = true
				n += o.Size
			}
		}
	}
	return len(seen), n
}

// TestCheck: a clean store has no problems; an object deleted, one shortened and one
// overwritten with other bytes of its size are reported with every release and path
// using them (the last only with ReadData); a recorded release whose manifest object is
// gone is reported, and the other release is still checked.
func TestCheck(t *testing.T) {
	t.Parallel()
	for _, k := range checkStores(t) {
		t.Run(k.name, func(t *testing.T) {
			t.Parallel()
			f := newCheckFixture(t, k)
			if len(f.releases) != 2 || f.releases[0].ID != f.r1.Release || f.releases[1].ID != f.r2.Release {
				t.Fatalf("releases to check: got %+v, want %s then %s", f.releases, f.r1.Release, f.r2.Release)
			}
			n, size := distinctObjects(f.m1, f.m2)
			man1 := int64(len(readManifestObject(t, f.s, f.r1.Manifest)))
			man2 := int64(len(readManifestObject(t, f.s, f.r2.Manifest)))
			for _, readData := range []bool{false, true} {
				r := f.check(t, readData)
				assertProblems(t, fmt.Sprintf("clean store, read data %v", readData), r)
				if r.Objects != n+2 || r.Bytes != size+man1+man2 {
					t.Errorf("clean store: checked %d objects, %d bytes; want %d, %d", r.Objects, r.Bytes, n+2, size+man1+man2)
				}
			}

			gone := pkg(t, f.m1, f.m1.Packages[0].Name) // in both releases
			short := pkg(t, f.m2, "added")              // in the second only
			bad := f.m1.Packages[1]                     // in both, same size, other bytes
			f.remove(t, gone.SHA256)
			f.overwrite(t, short.SHA256, short.Size-1)
			f.overwrite(t, bad.SHA256, bad.Size)
			missing := line(publish.ProblemMissing, gone.SHA256, gone.Size, 0,
				use(f.r1.Release, gone.Path), use(f.r2.Release, gone.Path))
			shortened := line(publish.ProblemSize, short.SHA256, short.Size, short.Size-1, use(f.r2.Release, short.Path))
			corrupt := line(publish.ProblemHash, bad.SHA256, bad.Size, bad.Size,
				use(f.r1.Release, bad.Path), use(f.r2.Release, bad.Path))
			assertProblems(t, "sizes only", f.check(t, false), missing, shortened)
			assertProblems(t, "read data", f.check(t, true), missing, shortened, corrupt)

			f.remove(t, f.r2.Manifest)
			r := f.check(t, true)
			assertProblems(t, "second manifest gone", r,
				line(publish.ProblemMissing, f.r2.Manifest, -1, 0, use(f.r2.Release, publish.ManifestPath)),
				line(publish.ProblemMissing, gone.SHA256, gone.Size, 0, use(f.r1.Release, gone.Path)),
				line(publish.ProblemHash, bad.SHA256, bad.Size, bad.Size, use(f.r1.Release, bad.Path)))
			if r.Releases[1].Readable || !r.Releases[0].Readable {
				t.Errorf("readable releases: got %v, %v; want true, false", r.Releases[0].Readable, r.Releases[1].Readable)
			}
		})
	}
}

func readManifestObject(t *testing.T, s store.Store, sum string) []byte {
	t.Helper()
	data, err := publish.FetchObject(context.Background(), s, sum)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestCheckLocalManifest: without controld, the local manifest's release is checked,
// its manifest object included.
func TestCheckLocalManifest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := openLocal(t, dir)
	p := newPushProject(t, "")
	res := push(t, p, s)
	rel, err := publish.LocalRelease(p.manifestPath())
	if err != nil {
		t.Fatal(err)
	}
	if rel.ID != res.Release || rel.Manifest != res.Manifest {
		t.Fatalf("LocalRelease: got %s (manifest %s), want %s (manifest %s)", rel.ID, rel.Manifest, res.Release, res.Manifest)
	}
	f := &checkFixture{s: s, damage: dirDamager(dir), releases: []publish.CheckRelease{rel}}
	m := loadManifest(t, p.manifestPath())
	n, _ := distinctObjects(m)
	r := f.check(t, false)
	assertProblems(t, "clean", r)
	if r.Objects != n+1 {
		t.Errorf("objects checked: got %d, want %d", r.Objects, n+1)
	}
	f.remove(t, res.Manifest)
	gone := m.Packages[0]
	f.remove(t, gone.SHA256)
	r, err = publish.Check(ctx, publish.CheckOptions{Store: s, Releases: f.releases})
	if err != nil {
		t.Fatal(err)
	}
	assertProblems(t, "manifest and a package gone", r,
		line(publish.ProblemMissing, res.Manifest, rel.LocalSize, 0, use(res.Release, publish.ManifestPath)),
		line(publish.ProblemMissing, gone.SHA256, gone.Size, 0, use(res.Release, gone.Path)))
}

// TestReleasesToCheck: every recorded release by default, a draft included; only the
// active and retained ones when served only; one by a prefix of its id; an unknown
// prefix is an error naming it.
func TestReleasesToCheck(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := store.NewMemory()
	c, url := newControld(t, s)
	p := newPushProject(t, "")
	r1 := pushTo(t, p, s, c, url, true)
	p.add(t, "draft")
	r2 := pushTo(t, p, s, c, url, false)
	ids := func(rels []publish.CheckRelease) []string {
		var out []string
		for _, r := range rels {
			out = append(out, r.ID+"/"+r.Manifest)
		}
		return out
	}
	one, two := r1.Release+"/"+r1.Manifest, r2.Release+"/"+r2.Manifest
	cases := []struct {
		name   string
		id     string
		served bool
		want   []string
	}{
		{"all", "", false, []string{one, two}},
		{"served", "", true, []string{one}},
		{"one by prefix", r2.Release[:10], false, []string{two}},
		{"one by prefix, served ignored", r2.Release[:10], true, []string{two}},
	}
	for _, tc := range cases {
		rels, err := publish.ReleasesToCheck(ctx, c, "test", tc.id, tc.served)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if got := ids(rels); !slices.Equal(got, tc.want) {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
	_, err := publish.ReleasesToCheck(ctx, c, "test", "zzzz", false)
	if err == nil || !strings.Contains(err.Error(), `"zzzz" matches 0`) {
		t.Errorf("unknown prefix: got %v, want an error saying \"zzzz\" matches 0 releases", err)
	}
}
