package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/armor-apt/armor/internal/testkit/controldtest"
	"github.com/armor-apt/armor/internal/testkit/synth"
	"github.com/armor-apt/armor/manifest"
	"github.com/armor-apt/armor/publish"
	"github.com/armor-apt/armor/store"
)

// TestColdRunnerRequests: a runner with only the checkout and one new .deb builds and
// pushes with a number of store requests that does not grow with the repository: the
// same at 1,000 and at 10,000 packages. It fetches the parent's dists/ files, never a
// pool file, and asks the store about no object of the parent.
func TestColdRunnerRequests(t *testing.T) {
	counts := map[int]store.Counts{}
	for _, n := range []int{1000, 10000} {
		// The store is in memory, so the workstation's push of every package is quick;
		// controld checks the same store.
		mem := store.NewMemory()
		srv := controldtest.Start(t, mem)
		tokenFile := filepath.Join(t.TempDir(), "token")
		if err := os.WriteFile(tokenFile, []byte(srv.Secret+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		site := controldSite{url: srv.URL, tokenFile: tokenFile, client: srv.Client}
		ws := pushProject{dir: t.TempDir()}
		ws.cfg = newProject(t, ws.dir, projectOptions{noDebs: true,
			extra: fmt.Sprintf("\n[controld]\nurl = %q\ntoken_file = %q\n", site.url, site.tokenFile)})
		if _, err := synth.Write(filepath.Join(ws.dir, "debs"), synth.Options{N: n, Seed: 3, AllEvery: 4}); err != nil {
			t.Fatal(err)
		}
		if _, err := runBuild(context.Background(), ws.cfg, buildOptions{}); err != nil {
			t.Fatal(err)
		}
		armorOK(t, "-c", ws.cfg, "repos", "create")
		if _, err := runPush(context.Background(), ws.cfg, pushOptions{Activate: true, Store: mem}); err != nil {
			t.Fatal(err)
		}

		counts[n] = coldAddOne(t, site, mem, ws.dir, n)
	}
	small, large := counts[1000], counts[10000]
	if large.Requests() > small.Requests() || large.Open > small.Open || large.Has > small.Has {
		t.Errorf("store requests grow with the repository: %+v at 1,000 packages, %+v at 10,000", small, large)
	}
}

// TestColdRunnerRefusesDamagedIndex: a fresh runner whose store gives other bytes for
// the parent's Packages.gz than its manifest lists builds nothing, and says which file
// and object, though the check is what first misses the parent's stanzas. (The build
// reads the store without a check of its own, and checks what it fetched against the
// manifest.)
func TestColdRunnerRefusesDamagedIndex(t *testing.T) {
	mem := store.NewMemory()
	ws := t.TempDir()
	cfg := newProject(t, ws, projectOptions{noDebs: true})
	if _, err := synth.Write(filepath.Join(ws, "debs"), synth.Options{N: 50, Seed: 5}); err != nil {
		t.Fatal(err)
	}
	b, err := runBuild(context.Background(), cfg, buildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := manifest.Load(b.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	var gz manifest.File
	for _, f := range m.Files {
		if strings.HasSuffix(f.Path, "/binary-amd64/Packages.gz") {
			gz = f
		}
		data, err := os.ReadFile(filepath.Join(b.Tree, filepath.FromSlash(f.Path)))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := mem.Put(context.Background(), f.SHA256, f.Size, bytes.NewReader(data)); err != nil {
			t.Fatal(err)
		}
	}
	if gz.Path == "" {
		t.Fatal("the release has no Packages.gz")
	}
	runner := t.TempDir()
	for _, f := range []string{testConfigName, testManifestName} {
		copyFileT(t, filepath.Join(ws, f), filepath.Join(runner, f))
	}
	if err := os.Mkdir(filepath.Join(runner, "debs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := synth.WriteOne(filepath.Join(runner, "debs"), "coldpkg", "1.0-1", "amd64", ""); err != nil {
		t.Fatal(err)
	}
	damaged := flippedStore{Store: mem, sum: gz.SHA256}
	_, err = runBuild(context.Background(), filepath.Join(runner, testConfigName), buildOptions{Store: damaged})
	if err == nil || !strings.Contains(err.Error(), gz.Path) || !strings.Contains(err.Error(), "the store's object "+gz.SHA256+" for "+gz.Path+" has other contents") {
		t.Fatalf("build on a damaged %s: %v", gz.Path, err)
	}
	if got, err := manifest.Load(filepath.Join(runner, testManifestName)); err != nil || got.ID != m.ID {
		t.Errorf("after the failed build the runner's manifest is not the parent's (%v)", err)
	}
}

// flippedStore is Store, but the object sum reads with its first byte changed.
type flippedStore struct {
	store.Store
	sum string
}

func (s flippedStore) Open(ctx context.Context, sum string, offset, length int64) (io.ReadCloser, error) {
	rc, err := s.Store.Open(ctx, sum, offset, length)
	if err != nil || sum != s.sum {
		return rc, err
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		return nil, err
	}
	if len(data) > 0 {
		data[0] ^= 0xff
	}
	return io.NopCloser(bytes.NewReader(data)), nil
}

// coldAddOne is what a CI runner that starts empty does to add one package to the
// repository that ws (a directory holding armor.toml and the manifest of site's active
// release of n packages) publishes in mem: armor build and armor push, from a checkout of
// the two files and one new .deb. It returns the store requests of the two.
func coldAddOne(t *testing.T, site controldSite, mem store.Store, ws string, n int) store.Counts {
	t.Helper()
	runner := t.TempDir()
	for _, f := range []string{testConfigName, testManifestName} {
		data, err := os.ReadFile(filepath.Join(ws, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(runner, f), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(runner, "debs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := synth.WriteOne(filepath.Join(runner, "debs"), "coldpkg", "1.0-1", "amd64", ""); err != nil {
		t.Fatal(err)
	}
	cs := store.NewCounting(mem)
	cfg := filepath.Join(runner, testConfigName)
	b, err := runBuild(context.Background(), cfg, buildOptions{Store: cs})
	if err != nil {
		t.Fatalf("%d packages: cold build: %v", n, err)
	}
	if b.Stats.Packages != n+1 || b.Stats.Added != 1 || b.Stats.Removed != 0 {
		t.Fatalf("%d packages: cold build stats %+v", n, b.Stats)
	}
	if _, err := runPush(context.Background(), cfg, pushOptions{Activate: true, Store: cs}); err != nil {
		t.Fatalf("%d packages: cold push: %v", n, err)
	}
	if got := site.active(t); got != b.Release {
		t.Fatalf("%d packages: active %s, want the cold runner's %s", n, got, b.Release)
	}
	c := cs.Counts()
	t.Logf("%d packages: cold build and push: %+v (%d requests)", n, c, c.Requests())
	return c
}

// TestBuildFromActive: a runner without a manifest builds on controld's active release
// with --from-active, and its release keeps the active one's packages. Without it, the
// runner's release is a first release, which push refuses to activate over the active
// one.
func TestBuildFromActive(t *testing.T) {
	site := newControldSite(t)
	ws := site.project(t)
	armorOK(t, "-c", ws.cfg, "repos", "create")
	if _, err := runPush(context.Background(), ws.cfg, pushOptions{Activate: true}); err != nil {
		t.Fatal(err)
	}
	active := site.active(t)

	runner := t.TempDir()
	data, err := os.ReadFile(ws.cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(runner, testConfigName)
	if err := os.WriteFile(cfg, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(runner, "debs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := synth.WriteOne(filepath.Join(runner, "debs"), "fromactive", "1.0-1", "amd64", ""); err != nil {
		t.Fatal(err)
	}

	first, err := runBuild(context.Background(), cfg, buildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if first.Parent != "" || first.Stats.Packages != 1 {
		t.Fatalf("a runner without a manifest built on %q with %d packages; want a first release of 1", first.Parent, first.Stats.Packages)
	}
	_, err = runPush(context.Background(), cfg, pushOptions{Activate: true})
	var stale *publish.StaleParentError
	if !errors.As(err, &stale) || site.active(t) != active {
		t.Fatalf("push of a first release over an active one: %v (active %s); want a StaleParentError and nothing activated", err, site.active(t))
	}

	res, err := runBuild(context.Background(), cfg, buildOptions{FromActive: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Parent != active || res.Stats.Packages != testPackagesCount+1 || res.Stats.Added != 1 || res.Stats.Removed != 0 {
		t.Fatalf("build --from-active: parent %s, stats %+v; want parent %s, %d packages, 1 added", res.Parent, res.Stats, active, testPackagesCount+1)
	}
	if _, err := runPush(context.Background(), cfg, pushOptions{Activate: true}); err != nil {
		t.Fatal(err)
	}
	if site.active(t) != res.Release {
		t.Errorf("active %s, want the runner's %s", site.active(t), res.Release)
	}
}

// TestControldReplicasFailover: every command that talks to controld takes a
// comma-separated list of replicas and moves past one that does not answer; a push
// through that list records and activates.
func TestControldReplicasFailover(t *testing.T) {
	site := newControldSite(t)
	p := site.project(t)
	armorOK(t, "-c", p.cfg, "repos", "create")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + l.Addr().String()
	l.Close()
	both := dead + "," + site.url
	out := armorOK(t, "-c", p.cfg, "push", "--controld", both)
	if !strings.Contains(out, "recorded and activated") {
		t.Fatalf("push through %s: %s", both, out)
	}
	if out := armorOK(t, "-c", p.cfg, "status", "--controld", both); !strings.Contains(out, short(site.active(t))) {
		t.Errorf("status through %s does not show the active release:\n%s", both, out)
	}
	armorFails(t, 1, []string{dead}, "-c", p.cfg, "status", "--controld", dead)
}
