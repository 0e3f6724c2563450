package edged

import (
	"bytes"
	"compress/gzip"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/armor-apt/armor/internal/testkit/apttest"
)

// aptRepo builds a real (unsigned) repository with apt-ftparchive from the fixture
// .debs, leaving out the packages named in without, and returns every file by path.
func aptRepo(t *testing.T, without ...string) map[string][]byte {
	t.Helper()
	if _, err := exec.LookPath("apt-ftparchive"); err != nil {
		t.Fatal("apt-ftparchive not found: run .ci/install-deps")
	}
	root := t.TempDir()
	debs, err := filepath.Glob("../testdata/debs/*.deb")
	if err != nil || len(debs) == 0 {
		t.Fatalf("no fixture .debs in ../testdata/debs (%v)", err)
	}
	pool := filepath.Join(root, "pool/main/n/natpmp")
	bin := filepath.Join(root, "dists/stable/main/binary-amd64")
	for _, d := range []string{pool, bin} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range debs {
		skip := false
		for _, w := range without {
			skip = skip || strings.HasPrefix(filepath.Base(d), w+"_")
		}
		if skip {
			continue
		}
		data, err := os.ReadFile(d)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(pool, filepath.Base(d)), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run := func(out string, args ...string) {
		cmd := exec.Command("apt-ftparchive", args...)
		cmd.Dir = root
		b, err := cmd.Output()
		if err != nil {
			t.Fatalf("apt-ftparchive %v: %v", args, err)
		}
		if err := os.WriteFile(filepath.Join(root, out), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run("dists/stable/main/binary-amd64/Packages", "packages", "pool")
	pk, _ := os.ReadFile(filepath.Join(bin, "Packages"))
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(pk)
	zw.Close()
	if err := os.WriteFile(filepath.Join(bin, "Packages.gz"), gz.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	run("Release.tmp", "-o", "APT::FTPArchive::Release::Suite=stable", "-o", "APT::FTPArchive::Release::Codename=stable",
		"-o", "APT::FTPArchive::Release::Components=main", "-o", "APT::FTPArchive::Release::Architectures=amd64",
		"release", "dists/stable")
	if err := os.Rename(filepath.Join(root, "Release.tmp"), filepath.Join(root, "dists/stable/Release")); err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		files[filepath.ToSlash(rel)], err = os.ReadFile(p)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestRealApt: apt-get, going through the edge as its HTTP proxy (so every request is
// absolute-form), updates, downloads intact packages, revalidates with 304s, and sees
// a flip.
func TestRealApt(t *testing.T) {
	cas := newTestStore()
	ctl := newFakeControld(t)
	tree := aptRepo(t)
	r1 := makeRelease(t, cas, "demo", "2026-11-20T10:00:00Z", tree)
	v := ctl.set(feedSite("demo", []string{hostA}, r1))
	e := startEdge(t, testConfig(t, ctl), cas)
	e.waitVersion(t, v)

	apt := apttest.New(t, apttest.Options{
		Sources: []apttest.Source{{URI: "http://" + hostA + "/", Suites: []string{"stable"}, Components: []string{"main"}}},
		Proxy:   "http://" + e.addr,
	})
	apt.Update(t)
	if got := apt.Policy(t, "natpmp-utils"); got != "20150609-7.1" {
		t.Fatalf("natpmp-utils candidate %q; want 20150609-7.1", got)
	}
	for _, f := range apt.Download(t, "natpmpc", "libnatpmp1") {
		want := tree["pool/main/n/natpmp/"+filepath.Base(f)]
		got, err := os.ReadFile(f)
		if err != nil || want == nil || !bytes.Equal(got, want) {
			t.Fatalf("downloaded %s differs from the published package (%v)", filepath.Base(f), err)
		}
	}
	if out := apt.Update(t); !strings.Contains(out, "Hit:") {
		t.Fatalf("second apt-get update did not revalidate (no Hit:):\n%s", out)
	}
	m := scrape(t, e.admin)
	for _, series := range []string{`armor_edge_requests_total{method="GET",status="200"}`, `armor_edge_requests_total{method="GET",status="304"}`} {
		if !strings.Contains(m, series) || strings.Contains(m, series+" 0\n") {
			t.Fatalf("apt's requests did not reach the edge as %s:\n%s", series, m)
		}
	}

	r2 := makeRelease(t, cas, "demo", "2026-11-21T10:00:00Z", aptRepo(t, "natpmp-utils"))
	flipped := feedSite("demo", []string{hostA}, r2, r1)
	flipped.Active.ActivatedAt = time.Now().UTC()
	e.waitVersion(t, ctl.set(flipped))
	apt.Update(t)
	if got := apt.Policy(t, "natpmp-utils"); got != "" {
		t.Fatalf("after the flip natpmp-utils candidate %q; want none", got)
	}
	if got := apt.Policy(t, "natpmpc"); got != "20150609-7.1+b2" {
		t.Fatalf("after the flip natpmpc candidate %q", got)
	}
}
