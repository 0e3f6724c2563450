package gen_test

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/armor-apt/armor/internal/testkit/apttest"
	"github.com/armor-apt/armor/manifest"
)

// treeServer serves a tree over HTTP on 127.0.0.1 and records the paths asked for.
type treeServer struct {
	URL  string
	mu   sync.Mutex
	reqs []string
}

func serveTree(t *testing.T, dir string) *treeServer {
	t.Helper()
	s := &treeServer{}
	files := http.FileServer(http.Dir(dir))
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.reqs = append(s.reqs, r.URL.Path)
		s.mu.Unlock()
		// HTTP dates have a resolution of one second: a rebuild within the second of
		// apt's last fetch would look unmodified and be answered 304. Always answer in
		// full; apt compares the content itself.
		r.Header.Del("If-Modified-Since")
		files.ServeHTTP(w, r)
	}))
	srv.Start()
	t.Cleanup(srv.Close)
	if !strings.HasPrefix(srv.URL, "http://127.0.0.1:") {
		t.Fatalf("test server is not on 127.0.0.1: %s", srv.URL)
	}
	s.URL = srv.URL
	return s
}

// requests returns the paths asked for since the last call.
func (s *treeServer) requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.reqs
	s.reqs = nil
	return r
}

// newApt returns a throwaway apt whose only source is the tree at url, trusted through
// Signed-By the binary keyring of r's key.
func newApt(t *testing.T, r *repo, url, byHash string) *apttest.Apt {
	t.Helper()
	keyring := filepath.Join(t.TempDir(), "repo.gpg")
	writeFile(t, keyring, publicKeyring(t, r.Opts.Key))
	return apttest.New(t, apttest.Options{
		Sources: []apttest.Source{{URI: url, Suites: []string{"stable"}, Components: []string{"main"}, SignedBy: keyring}},
		ByHash:  byHash,
	})
}

// assertDownloadsAll downloads every package of m for amd64 through apt and checks that
// each file has the sha256 the manifest lists.
func assertDownloadsAll(t *testing.T, a *apttest.Apt, m *manifest.Manifest) {
	t.Helper()
	want := map[string]string{} // file name -> sha256
	var names []string
	for _, p := range m.Packages {
		if p.Architecture == "amd64" || p.Architecture == "all" {
			want[filepath.Base(p.Path)] = p.SHA256
			names = append(names, p.Name)
		}
	}
	files := a.Download(t, names...)
	if len(files) != len(want) {
		t.Errorf("apt downloaded %d files, want %d", len(files), len(want))
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		// apt-get download names files with the epoch as %3a; the pool does not.
		name, rest, _ := strings.Cut(filepath.Base(f), "_")
		if _, noEpoch, ok := strings.Cut(rest, "%3a"); ok {
			rest = noEpoch
		}
		base := name + "_" + rest
		if sum, ok := want[base]; !ok {
			t.Errorf("apt downloaded %s, which the manifest does not list", filepath.Base(f))
		} else if sum != sha256Hex(data) {
			t.Errorf("%s: downloaded sha256 %s, manifest %s", base, sha256Hex(data), sum)
		}
	}
}

// assertInstallsWithDepends simulates installing the synthetic package that has the
// most dependencies (the last such in the index) and checks that apt installs it and every
// package its Depends field names.
func assertInstallsWithDepends(t *testing.T, a *apttest.Apt, r *repo) {
	t.Helper()
	var pkg string
	var deps []string
	for _, st := range stanzas(t, packagesFile(t, r, "amd64")) {
		if !strings.HasPrefix(st["Package"], "pkg") {
			continue // the real packages need libc6, which this apt does not have
		}
		var d []string
		for _, dep := range strings.Split(st["Depends"], ",") {
			if dep = strings.TrimSpace(dep); dep != "" {
				d = append(d, strings.Fields(dep)[0])
			}
		}
		if len(d) >= len(deps) && len(d) > 0 {
			pkg, deps = st["Package"], d
		}
	}
	if pkg == "" {
		t.Fatal("no synthetic package has Depends")
	}
	out := a.SimulateInstall(t, pkg)
	for _, p := range append(deps, pkg) {
		if !strings.Contains(out, "\nInst "+p+" ") {
			t.Errorf("simulated install of %s does not install %s:\n%s", pkg, p, out)
		}
	}
}

// TestApt serves built trees over HTTP to the real apt-get, with Signed-By the exported
// binary keyring: for each key and signature digest, apt updates without a warning,
// downloads every package (checked against the manifest's sums) and resolves an install
// with dependencies. Synthetic packages depend on lower-numbered ones.
func TestApt(t *testing.T) {
	for _, tc := range signCases {
		t.Run(tc.name, func(t *testing.T) {
			r := newRepo(t, repoConfig{Real: true, Synth: 12, Key: tc.key, Hash: tc.hash, Archs: []string{"amd64", "arm64"}})
			m := r.mustBuild().Manifest
			srv := serveTree(t, r.Opts.TreeDir)
			a := newApt(t, r, srv.URL, "")
			a.Update(t)
			if v := a.Policy(t, "natpmpc"); v != "20150609-7.1+b2" {
				t.Errorf("apt's candidate for natpmpc is %q, want 20150609-7.1+b2", v)
			}
			assertDownloadsAll(t, a, m)
			assertInstallsWithDepends(t, a, r)
		})
	}
}

// TestAptByHashAndIncremental: with Acquire::By-Hash=force apt fetches every index by
// hash and finds them; after an incremental build that adds one package (and one whose
// Architecture is all), the same apt, updating again, sees and downloads them.
func TestAptByHashAndIncremental(t *testing.T) {
	r := newRepo(t, repoConfig{Real: true, Synth: 12})
	m := r.mustBuild().Manifest
	srv := serveTree(t, r.Opts.TreeDir)
	a := newApt(t, r, srv.URL, "force")
	a.Update(t)
	assertByHashOnly(t, srv.requests())
	assertDownloadsAll(t, a, m)

	writeOne(t, r.in("new"), "newpkg", "3:2.0-1", "amd64", "pkg000010, pkg000003")
	writeOne(t, r.in("new"), "newdoc", "1.0", "all", "newpkg")
	res := r.mustBuild()
	if res.Stats.Read != 2 || res.Stats.Added != 2 {
		t.Fatalf("incremental build: %+v", res.Stats)
	}
	a.Update(t)
	assertByHashOnly(t, srv.requests())
	for pkg, want := range map[string]string{"newpkg": "3:2.0-1", "newdoc": "1.0"} {
		if v := a.Policy(t, pkg); v != want {
			t.Errorf("after the rebuild apt's candidate for %s is %q, want %s", pkg, v, want)
		}
	}
	assertDownloadsAll(t, a, res.Manifest)
	out := a.SimulateInstall(t, "newdoc")
	for _, p := range []string{"newdoc", "newpkg", "pkg000010"} {
		if !strings.Contains(out, "\nInst "+p+" ") {
			t.Errorf("simulated install of newdoc does not install %s:\n%s", p, out)
		}
	}

	// A client that never saw the first release, without by-hash, agrees.
	b := newApt(t, r, srv.URL, "")
	b.Update(t)
	if v := b.Policy(t, "newpkg"); v != "3:2.0-1" {
		t.Errorf("a fresh apt's candidate for newpkg is %q", v)
	}
}

// assertByHashOnly checks that apt asked for indexes only under by-hash/.
func assertByHashOnly(t *testing.T, reqs []string) {
	t.Helper()
	var byHash int
	for _, p := range reqs {
		switch {
		case strings.Contains(p, "/by-hash/SHA256/"):
			byHash++
		case strings.Contains(p, "/binary-"):
			t.Errorf("with By-Hash=force apt asked for %s", p)
		}
	}
	if byHash == 0 {
		t.Errorf("apt made no by-hash request: %v", reqs)
	}
}

// TestAptRejectsOtherKey: the same tree with Signed-By another key's keyring fails to
// update, so the tests above do check the signature.
func TestAptRejectsOtherKey(t *testing.T) {
	r := newRepo(t, repoConfig{Synth: 2})
	r.mustBuild()
	srv := serveTree(t, r.Opts.TreeDir)
	other := &repo{Opts: r.Opts}
	other.Opts.Key = fixtureKey(t, "eddsa")
	a := newApt(t, other, srv.URL, "")
	out, err := a.Cmd("update").CombinedOutput()
	if err == nil && !strings.Contains(string(out), "NO_PUBKEY") {
		t.Fatalf("apt accepted a repository signed by a key Signed-By does not name:\n%s", out)
	}
	if !strings.Contains(string(out), "NO_PUBKEY") && !strings.Contains(string(out), "not signed") {
		t.Errorf("apt's complaint does not mention the signature:\n%s", out)
	}
	if slices.Contains(strings.Fields(string(out)), "Packages") {
		t.Errorf("apt fetched an index of an unverified repository:\n%s", out)
	}
}
