package cli

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/armor-apt/armor/cli/config"
	"github.com/armor-apt/armor/gate"
	"github.com/armor-apt/armor/gen"
)

// TestBuildCheckKept: from the second build with one cache on, a build checks its change
// from what the build before kept, with
// the same verdicts as a check afresh (a package that cannot be installed is refused
// either way, the removal of what others need too); a kept snapshot that is damaged, of
// another armor, or of another release is not trusted: the build checks afresh and keeps
// a new one.
func TestBuildCheckKept(t *testing.T) {
	isolate(t)
	proj := t.TempDir()
	cfgPath := newProject(t, proj, projectOptions{archs: []string{"amd64"}})
	toml := strings.Replace(string(readFileT(t, cfgPath)), "[suite.inputs]", "check = \"refuse\"\n\n[suite.inputs]", 1)
	if err := os.WriteFile(cfgPath, []byte(toml), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	snapPath, changePath := newGateRun(cfg).keptPaths("stable")
	build := func(wantKept bool, o buildOptions) (*buildResult, error) {
		t.Helper()
		res, err := runBuild(context.Background(), cfgPath, o)
		if err == nil {
			if len(res.Check) != 1 || res.Check[0].kept != wantKept {
				t.Fatalf("check from what was kept: %+v, want %v", res.Check, wantKept)
			}
		}
		return res, err
	}
	mustBuild := func(wantKept bool, o buildOptions) *buildResult {
		t.Helper()
		res, err := build(wantKept, o)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	writeDeb(t, proj, "libbar", "3.0", "amd64", "libc6")
	writeDeb(t, proj, "foo", "2.0", "amd64", "libbar (>= 3)")
	mustBuild(false, buildOptions{})
	if exists(snapPath) {
		t.Fatal("the first build with this cache kept a snapshot")
	}
	writeDeb(t, proj, "bar", "1", "amd64", "foo")
	mustBuild(false, buildOptions{})
	if _, err := gate.OpenSnapshot(snapPath); err != nil {
		t.Fatalf("the second build kept no snapshot: %v", err)
	}

	writeDeb(t, proj, "baz", "1", "all", "foo")
	if r := mustBuild(true, buildOptions{}); r.Check[0].Checked != 1 || len(r.Check[0].Broken) != 0 {
		t.Fatalf("one package added: %+v", r.Check[0])
	}

	// Refused from what was kept, as afresh; the refused build keeps nothing, so the
	// next build starts from what the last release kept.
	writeDeb(t, proj, "qux", "1", "amd64", "libbar (>= 4)")
	if _, err := build(true, buildOptions{}); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "qux 1 (amd64) in stable/main cannot be installed on amd64") {
		t.Fatalf("a package that cannot be installed: %v", err)
	}
	removeDeb(t, proj, "qux")
	writeDeb(t, proj, "quux", "1", "amd64", "baz")
	mustBuild(true, buildOptions{})

	// Removing what another package needs is refused.
	removeDeb(t, proj, "libbar")
	if _, err := build(true, buildOptions{Remove: []gen.Removal{{Name: "libbar"}}}); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "foo 2.0 (amd64)") {
		t.Fatalf("removing libbar, which foo needs: %v", err)
	}
	writeDeb(t, proj, "libbar", "3.0", "amd64", "libc6")

	// A damaged snapshot: checked afresh, and kept anew.
	data := readFileT(t, snapPath)
	data[len(data)/2] ^= 0x20
	if err := os.WriteFile(snapPath, data, 0o644); err != nil {
		t.Fatal(err)
	}
	writeDeb(t, proj, "a1", "1", "amd64", "foo")
	mustBuild(false, buildOptions{})
	writeDeb(t, proj, "a2", "1", "amd64", "a1")
	mustBuild(true, buildOptions{})

	// A snapshot of another armor, with a change that names it and the parent.
	snap, err := gate.OpenSnapshot(snapPath)
	if err != nil {
		t.Fatal(err)
	}
	release, gone, extra, err := gate.DecodeChange(readFileT(t, changePath), snap)
	if err != nil {
		t.Fatal(err)
	}
	var pkgs []*gate.Package
	for k := range snap.Len() {
		p, err := snap.Package(k)
		if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	other, err := gate.DecodeSnapshot(gate.EncodeSnapshot("armor 0.0.1 other", "stable", []string{"amd64"}, pkgs))
	if err != nil {
		t.Fatal(err)
	}
	writeKept(t, snapPath, changePath, other, release, gone, extra)
	writeDeb(t, proj, "a3", "1", "amd64", "a2")
	mustBuild(false, buildOptions{})

	// A change of another release, whose packages are not the parent's.
	snap, err = gate.OpenSnapshot(snapPath)
	if err != nil {
		t.Fatal(err)
	}
	writeKept(t, snapPath, changePath, snap, "another release", []int{0}, nil)
	writeDeb(t, proj, "a4", "1", "amd64", "a3")
	mustBuild(false, buildOptions{})
	writeDeb(t, proj, "a5", "1", "amd64", "a4")
	mustBuild(true, buildOptions{})
}

// writeKept writes a snapshot and a change of it.
func writeKept(t *testing.T, snapPath, changePath string, snap *gate.Snapshot, release string, gone []int, extra []*gate.Package) {
	t.Helper()
	var pkgs []*gate.Package
	for k := range snap.Len() {
		p, err := snap.Package(k)
		if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	data := gate.EncodeSnapshot(snap.Stamp, snap.Suite, snap.Archs, pkgs)
	again, err := gate.DecodeSnapshot(data)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(snapPath, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(changePath, gate.EncodeChange(again.Sum(), release, gone, extra), 0o644); err != nil {
		t.Fatal(err)
	}
}

// removeDeb removes a package's .deb from the project's inputs.
func removeDeb(t *testing.T, proj, name string) {
	t.Helper()
	matches, err := filepath.Glob(filepath.Join(proj, "debs", name+"_*.deb"))
	if err != nil || len(matches) == 0 {
		t.Fatalf("no .deb of %s: %v", name, err)
	}
	for _, m := range matches {
		if err := os.Remove(m); err != nil {
			t.Fatal(err)
		}
	}
}
