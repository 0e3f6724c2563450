package cli

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/armor-apt/armor/cli/config"
	"github.com/armor-apt/armor/internal/testkit/controldtest"
	"github.com/armor-apt/armor/internal/testkit/synth"
	"github.com/armor-apt/armor/manifest"
	"github.com/armor-apt/armor/store"
)

// TestColdRunnerRequestsAt100k: a runner that starts empty adds one package to a
// repository of 100,000 with as many store requests as to one of 10,000 (issue #21).
// The parents are made cheaply (see publishSyntheticParent); what the runner does is the
// real build and push, as in TestColdRunnerRequests.
func TestColdRunnerRequestsAt100k(t *testing.T) {
	counts := map[int]store.Counts{}
	for _, n := range []int{10_000, 100_000} {
		mem := store.NewMemory()
		srv := controldtest.Start(t, mem)
		tokenFile := filepath.Join(t.TempDir(), "token")
		if err := os.WriteFile(tokenFile, []byte(srv.Secret+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		site := controldSite{url: srv.URL, tokenFile: tokenFile, client: srv.Client}
		ws := t.TempDir()
		start := time.Now()
		publishSyntheticParent(t, site, mem, ws, n)
		t.Logf("%d packages: parent published in %s", n, time.Since(start).Round(time.Millisecond))
		counts[n] = coldAddOne(t, site, mem, ws, n)
	}
	small, large := counts[10_000], counts[100_000]
	if large.Requests() > small.Requests() || large.Open > small.Open || large.Has > small.Has || large.List != 0 {
		t.Errorf("store requests grow with the repository: %+v at 10,000 packages, %+v at 100,000", small, large)
	}
}

// publishSyntheticParent publishes in mem, and activates in site's controld, a release of
// n packages whose armor.toml and manifest it leaves in ws. Building n real .deb files
// would cost minutes at 100,000 (one inode each, then reading them all), so the release
// is made the way a build makes a release on a parent: its parent is a release written
// here (a manifest of the n packages, and a tree holding their Packages stanzas and
// Contents lines, as a release of them has), which armor build takes as the parent it
// was never told to push, and builds on: Packages.gz and .xz, Contents-amd64.gz, Release
// and its signatures are armor's own. The pool objects in mem are a line of text each,
// not .deb files: a runner adding a package never reads the parent's pool files, and
// push and controld only check that they are in the store.
func publishSyntheticParent(t *testing.T, site controldSite, mem store.Store, ws string, n int) {
	t.Helper()
	cfgPath := newProject(t, ws, projectOptions{noDebs: true, archs: []string{"amd64"},
		extra: fmt.Sprintf("\n[controld]\nurl = %q\ntoken_file = %q\n", site.url, site.tokenFile)})
	data, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	// The workstation has no .deb at all.
	data = []byte(strings.Replace(string(data), "[suite.inputs]", "allow_empty = true\n\n[suite.inputs]", 1))
	if err := os.WriteFile(cfgPath, data, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	prev := &manifest.Manifest{Schema: manifest.SchemaVersion, Repository: cfg.Repository.Name, Date: "2026-01-01T00:00:00Z"}
	var packages, contents bytes.Buffer
	for i := range n {
		name := synth.Name(i)
		obj := []byte("synthetic pool object of " + name + "\n")
		sha := sha256.Sum256(obj)
		sum := hex.EncodeToString(sha[:])
		if _, err := mem.Put(ctx, sum, int64(len(obj)), bytes.NewReader(obj)); err != nil {
			t.Fatal(err)
		}
		path := "pool/main/p/" + name + "/" + name + "_1.0-1_amd64.deb"
		prev.Packages = append(prev.Packages, manifest.Package{Suite: testCodename, Component: "main",
			Name: name, Version: "1.0-1", Architecture: "amd64", Path: path, Size: int64(len(obj)), SHA256: sum})
		fmt.Fprintf(&packages, "Package: %s\nVersion: 1.0-1\nArchitecture: amd64\nMaintainer: Armor Test Suite <synth@example.invalid>\nInstalled-Size: 1\nSection: misc\nPriority: optional\nDescription: synthetic package %s for armor tests\nFilename: %s\nSize: %d\nMD5sum: %x\nSHA1: %x\nSHA256: %s\n\n",
			name, name, path, len(obj), md5.Sum(obj), sha1.Sum(obj), sum)
		fmt.Fprintf(&contents, "%-55s misc/%s\n", "usr/share/doc/"+name+"/README", name)
	}
	tree := cfg.Resolve(cfg.Output.Tree)
	dist := "dists/" + testCodename + "/main/"
	for _, f := range []struct {
		path string
		data []byte
	}{{dist + "Contents-amd64", contents.Bytes()}, {dist + "binary-amd64/Packages", packages.Bytes()}} {
		p := filepath.Join(tree, filepath.FromSlash(f.path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, f.data, 0o644); err != nil {
			t.Fatal(err)
		}
		sha := sha256.Sum256(f.data)
		prev.Files = append(prev.Files, manifest.File{Path: f.path, Size: int64(len(f.data)), SHA256: hex.EncodeToString(sha[:])})
	}
	if err := manifest.Seal(prev); err != nil {
		t.Fatal(err)
	}
	// The build cache's record of a release built here and never pushed: the release built
	// on it names its parent (none) as its own.
	cache := cfg.Resolve(cfg.Output.Cache)
	if err := os.MkdirAll(cache, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cache, "unrecorded"), []byte(prev.ID+" \n"), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := runBuild(ctx, cfgPath, buildOptions{Parent: prev})
	if err != nil {
		t.Fatal(err)
	}
	if res.Parent != "" || res.Stats.Packages != n || res.Stats.IndexesWritten != 1 || res.Stats.ContentsWritten != 1 {
		t.Fatalf("synthetic parent: built on %q, stats %+v; want a first release of %d packages", res.Parent, res.Stats, n)
	}
	armorOK(t, "-c", cfgPath, "repos", "create")
	if _, err := runPush(ctx, cfgPath, pushOptions{Activate: true, Store: mem}); err != nil {
		t.Fatal(err)
	}
	if got := site.active(t); got != res.Release {
		t.Fatalf("synthetic parent: active %s, want %s", got, res.Release)
	}
}
