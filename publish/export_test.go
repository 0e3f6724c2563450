package publish_test

// Tests of Export against a local directory store and a real S3 server on loopback: a
// full export equals the built tree, an incremental one reads only the objects Dir
// lacks, the write order keeps a live mirror consistent, --delete stays inside dists/
// and pool/, and a missing object is named without a half-written tree.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/armor-apt/armor/internal/atomicfile"
	"github.com/armor-apt/armor/internal/testkit/s3test"
	"github.com/armor-apt/armor/internal/testkit/synth"
	"github.com/armor-apt/armor/manifest"
	"github.com/armor-apt/armor/publish"
	"github.com/armor-apt/armor/store"
)

// orderCheck is a store that, whenever an export reads the object of a Release or
// InRelease file, checks that Dir already holds every file such a file may name: for
// Release (and Release.gpg) every path but the suites' Release files, for InRelease
// every other path. A mirror read during the export then never lists a missing file.
type orderCheck struct {
	store.Store
	m   *manifest.Manifest
	dir string

	mu       sync.Mutex
	problems []string
	checked  int
}

// signedKind is "InRelease", "Release" (Release and Release.gpg) or "" for a path that
// is not one of a suite's Release files.
func signedKind(p string) string {
	if !strings.HasPrefix(p, "dists/") || strings.Count(p, "/") != 2 {
		return ""
	}
	switch path.Base(p) {
	case "InRelease":
		return "InRelease"
	case "Release", "Release.gpg":
		return "Release"
	}
	return ""
}

func (s *orderCheck) Open(ctx context.Context, sum string, offset, length int64) (io.ReadCloser, error) {
	for p, o := range s.m.Paths() {
		if o.SHA256 == sum && signedKind(p) != "" {
			s.check(p)
		}
	}
	return s.Store.Open(ctx, sum, offset, length)
}

func (s *orderCheck) check(opened string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.checked++
	for p, o := range s.m.Paths() {
		k := signedKind(p)
		if k == "InRelease" || k == "Release" && signedKind(opened) == "Release" {
			continue
		}
		data, err := os.ReadFile(filepath.Join(s.dir, filepath.FromSlash(p)))
		if err != nil || int64(len(data)) != o.Size || sha256Hex(data) != o.SHA256 {
			s.problems = append(s.problems, fmt.Sprintf("%s read from the store before %s was written", opened, p))
		}
	}
}

func sha256Hex(data []byte) string {
	h := sha256.Sum256(data)
	return hex.EncodeToString(h[:])
}

// treeFiles lists the regular files under dir, slash-separated and relative to it.
func treeFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, name)
		out = append(out, filepath.ToSlash(rel))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// checkExported fails unless every path of m is in dir with the bytes of the built tree,
// and nothing else is under dir/dists and dir/pool.
func checkExported(t *testing.T, m *manifest.Manifest, dir, tree string) {
	t.Helper()
	paths := m.Paths()
	for p := range paths {
		want := readFileT(t, filepath.Join(tree, filepath.FromSlash(p)))
		got, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(p)))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("exported %s differs from the built tree's (%v)", p, err)
		}
	}
	for _, f := range treeFiles(t, dir) {
		if _, ok := paths[f]; !ok && (strings.HasPrefix(f, "dists/") || strings.HasPrefix(f, "pool/")) {
			t.Errorf("%s holds %s, which release %.12s does not list", dir, f, m.ID)
		}
	}
}

// export exports m into dir, and checks that its progress ends with every path and
// byte it had to write written.
func export(t *testing.T, s store.Store, m *manifest.Manifest, dir string, verify, del bool) *publish.ExportReport {
	t.Helper()
	var mu sync.Mutex
	var last publish.ExportProgress
	r, err := publish.Export(context.Background(), publish.ExportOptions{Store: s, Manifest: m, Dir: dir, Jobs: 4, Verify: verify, Delete: del,
		Progress: func(p publish.ExportProgress) { mu.Lock(); last = p; mu.Unlock() }})
	if err != nil {
		t.Fatalf("export of %.12s: %v", m.ID, err)
	}
	if written := r.Paths - r.Kept; last.PathsDone != written || last.PathsTotal != written || last.BytesDone != last.BytesTotal {
		t.Errorf("export of %.12s wrote %d paths; its last progress was %+v", m.ID, written, last)
	}
	return r
}

// TestExport: a full export into an empty directory reads each distinct object once and
// equals the built tree, written in an order a live mirror can be read in; exported
// again it reads nothing; after a release that adds and removes a package it reads only
// the objects the directory lacks, and --delete removes the dropped files but nothing
// outside dists/ and pool/; a file of the listed size is kept unless it is an index or
// Release file, or --verify re-hashes it.
func TestExport(t *testing.T) {
	t.Parallel()
	for _, kind := range s3test.StoreKinds(t) {
		t.Run(kind.Name, func(t *testing.T) {
			p := newPushProject(t, kind.Remote(t))
			cas := p.openStore(t)
			push(t, p, cas)
			m1 := loadManifest(t, p.manifestPath())
			dir := filepath.Join(t.TempDir(), "mirror")
			cas.Reset()

			oc := &orderCheck{Store: cas, m: m1, dir: dir}
			r := export(t, oc, m1, dir, false, false)
			n := cas.Counts()
			objects, paths := len(m1.Objects()), len(m1.Paths())
			if r.Fetched != objects || n.Open != int64(objects) || r.Linked != paths-objects || r.Kept != 0 || r.Paths != paths {
				t.Errorf("full export: %+v, %d opens; want %d objects fetched once each, %d paths linked", r, n.Open, objects, paths-objects)
			}
			if oc.checked == 0 || len(oc.problems) > 0 {
				t.Errorf("write order (%d Release files checked): %s", oc.checked, strings.Join(oc.problems, "\n"))
			}
			checkExported(t, m1, dir, p.tree())
			gz := "dists/stable/main/binary-amd64/Packages.gz"
			a, errA := os.Stat(filepath.Join(dir, gz))
			b, errB := os.Stat(filepath.Join(dir, filepath.Dir(gz), "by-hash", "SHA256", m1.Paths()[gz].SHA256))
			if errA != nil || errB != nil || !os.SameFile(a, b) {
				t.Errorf("%s and its by-hash copy are not one file (%v, %v)", gz, errA, errB)
			}

			// Unchanged: nothing read.
			cas.Reset()
			r = export(t, cas, m1, dir, false, false)
			if n := cas.Counts(); n.Requests() != 0 || r.Kept != paths || r.Fetched != 0 {
				t.Errorf("export again: %+v, store asked %+v", r, n)
			}

			// A second release: one package added, one removed.
			removed := m1.Packages[3]
			matches, _ := filepath.Glob(filepath.Join(p.dir, "debs", removed.Name+"_*.deb"))
			for _, f := range matches {
				os.Remove(f)
			}
			if _, err := synth.WriteOne(filepath.Join(p.dir, "debs"), "added", "1.0-1", "amd64", ""); err != nil {
				t.Fatal(err)
			}
			p.build(t)
			push(t, p, cas)
			m2 := loadManifest(t, p.manifestPath())
			old := m1.Paths()
			lacks := map[string]bool{}
			for q, o := range m2.Paths() {
				if old[q] != o {
					lacks[o.SHA256] = true
				}
			}
			for q, o := range m2.Paths() {
				if old[q] == o {
					delete(lacks, o.SHA256) // linked from the copy the directory holds
				}
			}
			outside := []string{"index.html", "other/pool/x.deb", "distsx/file"}
			for _, f := range outside {
				writeFile(t, filepath.Join(dir, f), "mine")
			}
			stray := []string{"pool/main/s/stray/stray_1_all.deb", "dists/gone/InRelease", "dists/stable/" + atomicfile.TempPrefix + "left"}
			for _, f := range stray {
				writeFile(t, filepath.Join(dir, f), "stray")
			}
			cas.Reset()
			oc = &orderCheck{Store: cas, m: m2, dir: dir}
			r = export(t, oc, m2, dir, false, true)
			if n := cas.Counts(); r.Fetched != len(lacks) || n.Open != int64(len(lacks)) || n.Requests() != n.Open {
				t.Errorf("incremental export: %+v, store asked %+v; want the %d objects the directory lacks", r, n, len(lacks))
			}
			t.Logf("incremental export: %d of %d objects fetched, %d paths kept, %d deleted", r.Fetched, len(m2.Objects()), r.Kept, len(r.Deleted))
			if len(oc.problems) > 0 {
				t.Errorf("write order: %s", strings.Join(oc.problems, "\n"))
			}
			checkExported(t, m2, dir, p.tree())
			for _, f := range outside {
				if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
					t.Errorf("--delete removed %s, outside dists/ and pool/: %v", f, err)
				}
			}
			for _, f := range append(stray, removed.Path) {
				if !slices.Contains(r.Deleted, f) {
					t.Errorf("--delete did not report %s deleted: %v", f, r.Deleted)
				}
			}
			if _, err := os.Stat(filepath.Join(dir, "dists", "gone")); err == nil {
				t.Error("--delete left the emptied directory dists/gone")
			}

			// Same size, other bytes: Release is re-hashed and rewritten, a pool file is
			// kept (the quick check) unless --verify.
			deb := m2.Packages[0]
			for _, q := range []string{"dists/stable/Release", deb.Path} {
				full := filepath.Join(dir, filepath.FromSlash(q))
				data := readFileT(t, full)
				data[len(data)/2] ^= 1
				os.Remove(full) // a hard link may share it
				writeFile(t, full, string(data))
			}
			cas.Reset()
			r = export(t, cas, m2, dir, false, false)
			if r.Fetched != 1 || cas.Counts().Open != 1 {
				t.Errorf("export over a damaged Release: %+v", r)
			}
			if got := readFileT(t, filepath.Join(dir, "dists/stable/Release")); sha256Hex(got) != m2.Paths()["dists/stable/Release"].SHA256 {
				t.Error("a Release file of the listed size but other bytes was kept")
			}
			if got := readFileT(t, filepath.Join(dir, filepath.FromSlash(deb.Path))); sha256Hex(got) == deb.SHA256 {
				t.Error("without --verify, a pool file of the listed size was read again")
			}
			r = export(t, cas, m2, dir, true, false)
			if r.Fetched != 1 || !r.Verified {
				t.Errorf("export --verify over a damaged pool file: %+v", r)
			}
			checkExported(t, m2, dir, p.tree())
		})
	}
}

// TestExportMissingObject: an object missing from the store fails the export, naming
// the object, its path and the release, and leaves the indexes and Release files as
// they were, with no temporary file behind.
func TestExportMissingObject(t *testing.T) {
	t.Parallel()
	p := newPushProject(t, filepath.Join(t.TempDir(), "store"))
	cas := p.openStore(t)
	push(t, p, cas)
	m1 := loadManifest(t, p.manifestPath())
	dir := t.TempDir()
	export(t, cas, m1, dir, false, false)
	before := map[string][]byte{}
	for _, f := range treeFiles(t, filepath.Join(dir, "dists")) {
		before[f] = readFileT(t, filepath.Join(dir, "dists", f))
	}

	if _, err := synth.WriteOne(filepath.Join(p.dir, "debs"), "gone", "1.0-1", "amd64", ""); err != nil {
		t.Fatal(err)
	}
	p.build(t)
	push(t, p, cas)
	m2 := loadManifest(t, p.manifestPath())
	i := slices.IndexFunc(m2.Packages, func(pk manifest.Package) bool { return pk.Name == "gone" })
	gone := m2.Packages[i]
	if err := cas.Delete(context.Background(), gone.SHA256); err != nil {
		t.Fatal(err)
	}
	_, err := publish.Export(context.Background(), publish.ExportOptions{Store: cas, Manifest: m2, Dir: dir, Jobs: 4})
	if err == nil {
		t.Fatal("export of a release whose object is missing succeeded")
	}
	for _, want := range []string{gone.SHA256, gone.Path, m2.ID, "missing from store", "no index or Release file"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error lacks %q: %v", want, err)
		}
	}
	for f, data := range before {
		if !bytes.Equal(readFileT(t, filepath.Join(dir, "dists", f)), data) {
			t.Errorf("the failed export changed dists/%s", f)
		}
	}
	for _, f := range treeFiles(t, dir) {
		if strings.Contains(f, atomicfile.TempPrefix) || f == gone.Path {
			t.Errorf("the failed export left %s", f)
		}
	}
}

// TestFindRelease: a release is found by its id or a prefix of it; an unknown id and a
// prefix of several releases are errors naming them; the active release and its
// manifest are read from controld and the store.
func TestFindRelease(t *testing.T) {
	t.Parallel()
	p := newPushProject(t, filepath.Join(t.TempDir(), "store"))
	cas := p.openStore(t)
	c, url := newControld(t, cas)
	ctx := context.Background()
	if _, err := publish.ActiveRelease(ctx, c, "test"); err == nil || !strings.Contains(err.Error(), "no active release") {
		t.Errorf("active release of a repository with none: %v", err)
	}
	// Record releases until two share their first digit (at most 17).
	var ids []string
	shared := ""
	for k := 0; shared == ""; k++ {
		if k > 0 {
			if _, err := synth.WriteOne(filepath.Join(p.dir, "debs"), fmt.Sprintf("find%d", k), "1.0-1", "amd64", ""); err != nil {
				t.Fatal(err)
			}
			p.build(t)
		}
		id := pushTo(t, p, cas, c, url, k == 0).Release
		for _, other := range ids {
			if other[0] == id[0] {
				shared = id[:1]
			}
		}
		ids = append(ids, id)
	}
	for _, q := range []string{ids[0], ids[0][:8]} {
		r, err := publish.FindRelease(ctx, c, "test", q)
		if err != nil || r.ID != ids[0] || r.Manifest == "" {
			t.Errorf("FindRelease(%s) = %+v, %v", q, r, err)
			continue
		}
		m, err := publish.FetchRelease(ctx, cas, r)
		if err != nil || m.ID != ids[0] {
			t.Errorf("FetchRelease(%s): %v", q, err)
		}
	}
	_, err := publish.FindRelease(ctx, c, "test", "deadbeef00")
	if err == nil || !strings.Contains(err.Error(), "release deadbeef00") || !strings.Contains(err.Error(), "no recorded release") {
		t.Errorf("unknown id: %v", err)
	}
	_, err = publish.FindRelease(ctx, c, "test", shared)
	if err == nil || !strings.Contains(err.Error(), "release "+shared+" is ambiguous") {
		t.Errorf("ambiguous prefix %s of %v: %v", shared, ids, err)
	}
	a, err := publish.ActiveRelease(ctx, c, "test")
	if err != nil || a.ID != ids[0] {
		t.Errorf("active release = %+v, %v; want %.12s", a, err, ids[0])
	}
	if _, err := publish.FetchRelease(ctx, cas, publish.RecordedRelease{ID: ids[1], Manifest: a.Manifest}); err == nil || !strings.Contains(err.Error(), "holds release "+ids[0]) {
		t.Errorf("a manifest of another release: %v", err)
	}
}

func writeFile(t *testing.T, name, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// putObject stores data in s and returns its object.
func putObject(t *testing.T, s store.Store, data string) manifest.Object {
	t.Helper()
	o := manifest.Object{SHA256: sha256Hex([]byte(data)), Size: int64(len(data))}
	if _, err := s.Put(context.Background(), o.SHA256, o.Size, strings.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	return o
}

// TestExportSharedObject: a path whose object another path of the directory holds is
// copied from it when that file is only known by its size, and read from the store when
// the copy turns out to hold other bytes; a store object of the wrong content is refused.
func TestExportSharedObject(t *testing.T) {
	t.Parallel()
	mem := store.NewMemory()
	deb := putObject(t, mem, strings.Repeat("deb", 100))
	other := putObject(t, mem, strings.Repeat("DEB", 100)) // same size
	main, contrib := "pool/main/x/x_1_all.deb", "pool/contrib/x/x_1_all.deb"
	m := &manifest.Manifest{ID: "shared", Files: []manifest.File{
		{Path: contrib, Size: deb.Size, SHA256: deb.SHA256},
		{Path: main, Size: deb.Size, SHA256: deb.SHA256},
	}}
	for _, tc := range []struct {
		name          string
		mainHolds     string // what the directory's main path holds first
		fetched, kept int
		mainAfter     string
	}{
		{"right bytes", strings.Repeat("deb", 100), 0, 1, strings.Repeat("deb", 100)},
		{"same size, other bytes", strings.Repeat("DEB", 100), 1, 1, strings.Repeat("DEB", 100)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFile(t, filepath.Join(dir, main), tc.mainHolds)
			cas := store.NewCounting(mem)
			r := export(t, cas, m, dir, false, false)
			if r.Fetched != tc.fetched || r.Kept != tc.kept || r.Linked != 1-tc.fetched || cas.Counts().Open != int64(tc.fetched) {
				t.Errorf("export: %+v, %d opens", r, cas.Counts().Open)
			}
			if got := string(readFileT(t, filepath.Join(dir, contrib))); got != strings.Repeat("deb", 100) {
				t.Errorf("%s holds %.12q", contrib, got)
			}
			if got := string(readFileT(t, filepath.Join(dir, main))); got != tc.mainAfter {
				t.Errorf("%s holds %.12q, want %.12q (kept on its size)", main, got, tc.mainAfter)
			}
		})
	}

	// The store answers other bytes for the object: refused, nothing written.
	lying := &manifest.Manifest{ID: "lying", Files: []manifest.File{{Path: "pool/main/y/y_1_all.deb", Size: other.Size, SHA256: deb.SHA256}}}
	swapped := swapStore{Store: mem, from: deb.SHA256, to: other.SHA256}
	dir := t.TempDir()
	_, err := publish.Export(context.Background(), publish.ExportOptions{Store: swapped, Manifest: lying, Dir: dir})
	if err == nil || !strings.Contains(err.Error(), "sha256 "+other.SHA256) || !strings.Contains(err.Error(), "pool/main/y/y_1_all.deb") {
		t.Errorf("an object with other bytes: %v", err)
	}
	if files := treeFiles(t, dir); len(files) != 0 {
		t.Errorf("the refused export left %v", files)
	}
}

// swapStore answers the object to when asked for from.
type swapStore struct {
	store.Store
	from, to string
}

func (s swapStore) Open(ctx context.Context, sum string, offset, length int64) (io.ReadCloser, error) {
	if sum == s.from {
		sum = s.to
	}
	return s.Store.Open(ctx, sum, offset, length)
}

// TestExportDeleteThroughLink: --delete walks a pool/ that is a symbolic link to another
// directory, removing what the release does not list there, and leaves the link; a link
// to a directory below pool/ is neither removed nor followed.
func TestExportDeleteThroughLink(t *testing.T) {
	t.Parallel()
	mem := store.NewMemory()
	deb := putObject(t, mem, "a package")
	m := &manifest.Manifest{ID: "linked", Files: []manifest.File{{Path: "pool/main/a/a_1_all.deb", Size: deb.Size, SHA256: deb.SHA256}}}
	dir, disk := t.TempDir(), t.TempDir()
	if err := os.Symlink(disk, filepath.Join(dir, "pool")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(disk, "main/s/stray.deb"), "stray")
	elsewhere := t.TempDir()
	writeFile(t, filepath.Join(elsewhere, "precious"), "mine")
	if err := os.Symlink(elsewhere, filepath.Join(disk, "main", "z")); err != nil {
		t.Fatal(err)
	}
	r := export(t, mem, m, dir, false, true)
	if _, err := os.Stat(filepath.Join(disk, "main", "z", "precious")); err != nil {
		t.Errorf("--delete removed a link to a directory below pool/, or what it leads to: %v", err)
	}
	if !slices.Equal(r.Deleted, []string{"pool/main/s/stray.deb"}) {
		t.Errorf("deleted %v", r.Deleted)
	}
	if got := treeFiles(t, disk); !slices.Equal(got, []string{"main/a/a_1_all.deb", "main/z"}) {
		t.Errorf("the linked pool holds %v", got)
	}
	if fi, err := os.Lstat(filepath.Join(dir, "pool")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("pool is no longer the link: %v %v", fi, err)
	}
}
