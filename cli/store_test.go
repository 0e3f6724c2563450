package cli

// Tests of armor store check as an operator runs it: releases recorded in a controld in
// process over a local directory store, and a local manifest on a real S3 server, with
// objects deleted and rewritten behind armor's back.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/armor-apt/armor/internal/testkit/s3test"
	"github.com/armor-apt/armor/manifest"
	"github.com/armor-apt/armor/publish"
	"github.com/armor-apt/armor/store"
	"github.com/rclone/rclone/fs"
	"github.com/rclone/rclone/fs/object"
)

// objectFile is where a store in the local directory dir keeps the object sum.
func objectFile(dir, sum string) string {
	return filepath.Join(dir, filepath.FromSlash(store.ObjectPath(sum)))
}

func removeT(t *testing.T, path string) {
	t.Helper()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
}

func writeBytes(t *testing.T, path string, n int64) {
	t.Helper()
	if err := os.WriteFile(path, bytes.Repeat([]byte("x"), int(n)), 0o644); err != nil {
		t.Fatal(err)
	}
}

func packageNamed(t *testing.T, m *manifest.Manifest, name string) manifest.Package {
	t.Helper()
	i := slices.IndexFunc(m.Packages, func(p manifest.Package) bool { return p.Name == name })
	if i < 0 {
		t.Fatalf("no package %s in release %s", name, m.ID)
	}
	return m.Packages[i]
}

// assertLines fails unless out has exactly the lines want after its first (the summary).
func assertLines(t *testing.T, what, out string, want ...string) {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	got := lines[1:]
	if !slices.Equal(got, want) {
		t.Errorf("%s: problem lines:\n got  %q\n want %q\nwhole output:\n%s", what, got, want, out)
	}
}

func assertContains(t *testing.T, what, out string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("%s: output lacks %q:\n%s", what, w, out)
		}
	}
}

// TestStoreCheck: two releases pushed to controld; a clean store passes; a pool file
// deleted (used by both releases) and one shortened (used by the second) are listed with
// every release and path, exit 1; --read-data also finds one rewritten with other bytes
// of its size; --release checks one release; a release whose manifest object is gone is
// reported.
func TestStoreCheck(t *testing.T) {
	t.Parallel()
	site := newControldSite(t)
	p := site.project(t)
	armorOK(t, "-c", p.cfg, "repos", "create")
	armorOK(t, "-c", p.cfg, "push")
	m1 := loadManifest(t, p.manifestPath())
	p.add(t, "added")
	armorOK(t, "-c", p.cfg, "push")
	m2 := loadManifest(t, p.manifestPath())
	r1, r2 := short(m1.ID), short(m2.ID)

	out := armorOK(t, "-c", p.cfg, "store", "check")
	assertContains(t, "clean store", out, "checked 2 release(s)", "0 problem(s)")
	assertLines(t, "clean store", out)
	armorOK(t, "-c", p.cfg, "store", "check", "--read-data")

	gone := m1.Packages[0]
	shortened := packageNamed(t, m2, "added")
	bad := m1.Packages[1]
	removeT(t, objectFile(site.remote, gone.SHA256))
	writeBytes(t, objectFile(site.remote, shortened.SHA256), shortened.Size-1)
	writeBytes(t, objectFile(site.remote, bad.SHA256), bad.Size)
	missingLine := fmt.Sprintf("missing %s, %d bytes, used by %s in %s, %s", gone.SHA256, gone.Size, gone.Path, r1, r2)
	sizeLine := fmt.Sprintf("size_mismatch (the store holds %d bytes) %s, %d bytes, used by %s in %s",
		shortened.Size-1, shortened.SHA256, shortened.Size, shortened.Path, r2)
	hashPrefix := fmt.Sprintf("hash_mismatch (the store holds %d bytes with sha256 ", bad.Size)
	hashSuffix := fmt.Sprintf(") %s, %d bytes, used by %s in %s, %s", bad.SHA256, bad.Size, bad.Path, r1, r2)

	r := armorFails(t, 1, []string{"2 object(s) missing or damaged"}, "-c", p.cfg, "store", "check")
	// Sorted by path: pool/main/a/added before pool/main/p/pkg000000.
	assertLines(t, "sizes only", r.stdout, sizeLine, missingLine)

	r = armorFails(t, 1, nil, "-c", p.cfg, "store", "check", "--read-data")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 4 || lines[1] != sizeLine || lines[2] != missingLine ||
		!strings.HasPrefix(lines[3], hashPrefix) || !strings.HasSuffix(lines[3], hashSuffix) {
		t.Errorf("read data: want the shortened, the missing, then the rewritten object:\n %s\n %s\n %s<sha256>%s\ngot:\n%s", sizeLine, missingLine, hashPrefix, hashSuffix, r.stdout)
	}

	r = armorFails(t, 1, nil, "--json", "-c", p.cfg, "store", "check", "--release", r1)
	var rep publish.CheckReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("--json printed no report (%v):\n%s", err, r)
	}
	want := []publish.Problem{{Kind: publish.ProblemMissing, SHA256: gone.SHA256, Size: gone.Size,
		Uses: []publish.Use{{Release: m1.ID, Path: gone.Path}}}}
	if len(rep.Releases) != 1 || rep.Releases[0].ID != m1.ID || !equalProblems(rep.Problems, want) {
		t.Errorf("--release %s --json: got releases %+v, problems %+v; want release %s, problems %+v", r1, rep.Releases, rep.Problems, m1.ID, want)
	}

	// The armor binary: the same exit status, and no progress off a terminal.
	sum := sha256.Sum256(readFileT(t, p.manifestPath()))
	msum := hex.EncodeToString(sum[:])
	removeT(t, objectFile(site.remote, msum))
	br, err := runBinary(armorBinary(t), "-c", p.cfg, "store", "check")
	if err != nil {
		t.Fatal(err)
	}
	if br.code != 1 {
		t.Fatalf("with the second release's manifest gone: want exit 1, got %s", br)
	}
	assertLines(t, "manifest gone", br.stdout,
		fmt.Sprintf("missing %s, size unrecorded, used by %s in %s", msum, publish.ManifestPath, r2),
		fmt.Sprintf("missing %s, %d bytes, used by %s in %s", gone.SHA256, gone.Size, gone.Path, r1))
	if strings.Count(br.stderr, "\n") != 1 {
		t.Errorf("stderr off a terminal: want only the error line, got:\n%s", br.stderr)
	}
}

func equalProblems(got, want []publish.Problem) bool {
	return slices.EqualFunc(got, want, func(a, b publish.Problem) bool {
		return a.Kind == b.Kind && a.SHA256 == b.SHA256 && a.Size == b.Size && slices.Equal(a.Uses, b.Uses)
	})
}

// TestStoreCheckLocalManifest: without controld, store check asks for --manifest, and
// with it checks the local release on a real S3 server.
func TestStoreCheckLocalManifest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := s3test.Start(t)
	remote := srv.Remote("bucket", "armor")
	p := newPushProject(t, remote)
	s, err := store.OpenRclone(ctx, remote)
	if err != nil {
		t.Fatal(err)
	}
	_, err = publish.Push(ctx, publish.PushOptions{Manifest: p.manifestPath(), Tree: p.tree(),
		Cache: filepath.Join(p.dir, ".armor", "cache"), Store: s})
	if err != nil {
		t.Fatalf("push: %v", err)
	}
	armorFails(t, 1, []string{"no controld configured", "--manifest " + p.manifestPath()}, "-c", p.cfg, "store", "check")
	out := armorOK(t, "-c", p.cfg, "store", "check", "--manifest", p.manifestPath())
	assertContains(t, "clean", out, "checked 1 release(s)", "0 problem(s)")

	m := loadManifest(t, p.manifestPath())
	gone := m.Packages[2]
	f, err := fs.NewFs(ctx, remote)
	if err != nil {
		t.Fatal(err)
	}
	// Through S3 requests: rclone serve s3 caches its directory, so it would not see a
	// file removed under it.
	o, err := f.NewObject(ctx, store.ObjectPath(gone.SHA256))
	if err == nil {
		err = o.Remove(ctx)
	}
	if err != nil {
		t.Fatal(err)
	}
	data := []byte("other bytes")
	info := object.NewStaticObjectInfo(store.ObjectPath(m.Packages[3].SHA256), time.Now(), int64(len(data)), true, nil, f)
	if _, err := f.Put(ctx, bytes.NewReader(data), info); err != nil {
		t.Fatal(err)
	}
	bad := m.Packages[3]
	r := armorFails(t, 1, nil, "-c", p.cfg, "store", "check", "--manifest", p.manifestPath())
	id := short(m.ID)
	assertLines(t, "damaged", r.stdout,
		fmt.Sprintf("missing %s, %d bytes, used by %s in %s", gone.SHA256, gone.Size, gone.Path, id),
		fmt.Sprintf("size_mismatch (the store holds %d bytes) %s, %d bytes, used by %s in %s", len(data), bad.SHA256, bad.Size, bad.Path, id))

	// push --repair uploads both again from the local tree; the check is then clean.
	r = armor(t, "-c", p.cfg, "push", "--store-only", "--repair")
	if r.code != 0 || !strings.Contains(r.stderr, "2 uploaded again, 0 not in the local tree either") {
		t.Fatalf("push --repair: %s", r)
	}
	out = armorOK(t, "-c", p.cfg, "store", "check", "--read-data", "--manifest", p.manifestPath())
	assertContains(t, "repaired", out, "0 problem(s)")
}

// TestStoreCheckReportsToControld: the store loses an object of the active release;
// store check lists it (exit 1) and reports it to controld, which then refuses a release
// built on the active one, naming the object, where before it took the active release's
// objects as present; push --repair uploads it again from the tree, and the push goes
// through. Repairing the active release itself also empties the set.
func TestStoreCheckReportsToControld(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	site := newControldSite(t)
	p := site.project(t)
	armorOK(t, "-c", p.cfg, "repos", "create")
	armorOK(t, "-c", p.cfg, "push")
	m1 := loadManifest(t, p.manifestPath())
	gone := m1.Packages[0]
	removeT(t, objectFile(site.remote, gone.SHA256))

	r := armorFails(t, 1, []string{"1 object(s) missing or damaged", "controld found 1 of them gone too", "armor push --repair"},
		"-c", p.cfg, "store", "check")
	assertLines(t, "store check", r.stdout,
		fmt.Sprintf("missing %s, %d bytes, used by %s in %s", gone.SHA256, gone.Size, gone.Path, short(m1.ID)))
	set, err := site.client.Missing(ctx, "test")
	if err != nil || len(set) != 1 || set[0].SHA256 != gone.SHA256 || set[0].Problem != "missing" {
		t.Fatalf("controld's known-missing set after the check: %+v, %v; want only %s, missing", set, err, gone.SHA256)
	}

	// The active release, the repository's first, pushed again: refused for the lost file
	// alone, not as a first release pushed over another.
	r = armorFails(t, 1, []string{"still missing from the store", gone.SHA256, "armor push --repair"}, "-c", p.cfg, "push")
	if strings.Contains(r.stderr, "first release") {
		t.Errorf("push of the active first release with a lost object is refused as a first release:\n%s", r.stderr)
	}

	// A release built on the active one still serves the lost file: refused, naming it.
	p.add(t, "added")
	m2 := loadManifest(t, p.manifestPath())
	if packageNamed(t, m2, gone.Name).SHA256 != gone.SHA256 {
		t.Fatalf("the new release does not serve %s any more: the test proves nothing", gone.Path)
	}
	armorFails(t, 1, []string{"still missing from the store", gone.SHA256 + " (" + gone.Path + ": missing)", "armor push --repair"},
		"-c", p.cfg, "push")
	if got := site.active(t); got != m1.ID {
		t.Fatalf("after the refused push the active release is %s, want %s", got, m1.ID)
	}

	out := armor(t, "-c", p.cfg, "push", "--repair")
	if out.code != 0 || !strings.Contains(out.stderr, "1 uploaded again") || !strings.Contains(out.stdout, "; uploaded 1 (") {
		t.Fatalf("push --repair: want exit 0 and the object uploaded again, got %s", out)
	}
	if got := site.active(t); got != m2.ID {
		t.Fatalf("after push --repair the active release is %s, want %s", got, m2.ID)
	}
	if set, err := site.client.Missing(ctx, "test"); err != nil || len(set) != 0 {
		t.Errorf("controld's known-missing set after the repair: %+v, %v; want it empty", set, err)
	}
	armorOK(t, "-c", p.cfg, "store", "check")

	// An object of the active release lost again: push --repair of that same release
	// (recorded already, so nothing is verified) still takes it out of the set.
	added := packageNamed(t, m2, "added")
	removeT(t, objectFile(site.remote, added.SHA256))
	armorFails(t, 1, []string{"controld found 1 of them gone too"}, "-c", p.cfg, "store", "check")
	if out := armor(t, "-c", p.cfg, "push", "--repair"); out.code != 0 {
		t.Fatalf("push --repair of the active release: %s", out)
	}
	if set, err := site.client.Missing(ctx, "test"); err != nil || len(set) != 0 {
		t.Errorf("controld's known-missing set after repairing the active release: %+v, %v; want it empty", set, err)
	}
}
