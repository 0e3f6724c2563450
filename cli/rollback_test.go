package cli

// Tests of armor rollback and what follows it, with the armor binary against a controld
// in process over a local directory store: a push of the rolled-back release, or of a
// release built on it, is refused with exit status 4 until --force; the local manifest
// follows the active release, so the next build starts from it.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/armor-apt/armor/manifest"
	"github.com/armor-apt/armor/publish"
	"github.com/armor-apt/armor/store"
)

// activeManifest returns the bytes of the active release's manifest object.
func (s controldSite) activeManifest(t *testing.T) []byte {
	t.Helper()
	ctx := context.Background()
	st, err := s.client.Status(ctx, "test")
	if err != nil || st.Active == nil {
		t.Fatalf("status: %+v, %v", st, err)
	}
	cas, err := store.OpenRclone(ctx, s.remote)
	if err != nil {
		t.Fatal(err)
	}
	data, err := publish.FetchObject(ctx, cas, st.Active.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// pushBinary runs armor push (with args) as a separate process.
func pushBinary(t *testing.T, bin string, p pushProject, args ...string) result {
	t.Helper()
	r, err := runBinary(bin, append([]string{"-c", p.cfg, "push"}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// checkRolledBack fails unless r is a push refused with exit status 4 because rolled
// was rolled back (release itself, or the release it was built on), with a message
// naming both and the two ways on.
func checkRolledBack(t *testing.T, r result, release, rolled string) {
	t.Helper()
	if r.code != exitRolledBack {
		t.Fatalf("push of %.12s after %.12s was rolled back: want exit %d, got %s", release, rolled, exitRolledBack, r)
	}
	what, force, on := "release "+release[:12]+" was rolled back at ", "armor push --force", "armor build --from-active and push that"
	if release != rolled {
		what = "release " + release[:12] + " is built on release " + rolled[:12] + ", which was rolled back at "
		force = "armor activate --force " + rolled[:12] + ", then push again"
		on = "run armor push --rebase"
	}
	for _, want := range []string{what, " by root ", on, force, "nothing was activated"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("the refused push's message lacks %q:\n%s", want, r.stderr)
		}
	}
	if !strings.Contains(r.stdout, "not activated in controld") || strings.Contains(r.stdout, "recorded and activated") {
		t.Errorf("the refused push's report:\n%s", r.stdout)
	}
}

// TestRollbackRefusesRepush: push A, push B, roll back (pointer-only, or re-signed).
// The local manifest is then the active release's; pushing B again (after a pointer
// rollback its parent is active again) or a release built on B exits 4 and activates
// nothing, and push --json says rolled_back. Then either push --force re-activates B
// (over the re-signed release, after a re-signed rollback), or a build starts from the
// active release and its push activates.
func TestRollbackRefusesRepush(t *testing.T) {
	t.Parallel()
	bin := armorBinary(t)
	for _, pointerOnly := range []bool{true, false} {
		for _, then := range []string{"force", "build", "rebase"} {
			t.Run(fmt.Sprintf("pointer-only=%v/%s", pointerOnly, then), func(t *testing.T) {
				t.Parallel()
				rollbackThen(t, bin, pointerOnly, then)
			})
		}
	}
}

func rollbackThen(t *testing.T, bin string, pointerOnly bool, then string) {
	site := newControldSite(t)
	p := site.project(t)
	armorOK(t, "-c", p.cfg, "repos", "create")
	if r := pushBinary(t, bin, p); r.code != 0 {
		t.Fatalf("push of A: %s", r)
	}
	a := site.active(t)
	aManifest := readFileT(t, p.manifestPath())
	b := p.add(t, "alpha").Release
	if r := pushBinary(t, bin, p); r.code != 0 || site.active(t) != b {
		t.Fatalf("push of B: %s", r)
	}
	bProject := p.clone(t) // a checkout that still has B's manifest

	args := []string{"-c", p.cfg, "rollback"}
	if pointerOnly {
		args = append(args, "--pointer-only")
	}
	out := armorOK(t, args...)
	active := site.active(t)
	switch {
	case pointerOnly && active != a:
		t.Fatalf("after rollback --pointer-only %.12s is active, want A %.12s", active, a)
	case !pointerOnly && (active == a || active == b):
		t.Fatalf("after armor rollback %.12s is active, want a re-signed release", active)
	}
	local := readFileT(t, p.manifestPath())
	if !bytes.Equal(local, site.activeManifest(t)) {
		t.Fatalf("after armor rollback the local manifest is not the active release's:\n%s", out)
	}
	if pointerOnly && !bytes.Equal(local, aManifest) {
		t.Errorf("after rollback --pointer-only the local manifest is not A's")
	}
	for _, want := range []string{"local manifest " + p.manifestPath() + " now holds the active release " + active[:12],
		"release " + b[:12] + " is marked rolled back"} {
		if !strings.Contains(out, want) {
			t.Errorf("rollback output lacks %q:\n%s", want, out)
		}
	}

	// B again: refused, nothing activated.
	checkRolledBack(t, pushBinary(t, bin, bProject), b, b)
	r, res, err := pushJSON(bin, bProject)
	if err != nil {
		t.Fatal(err)
	}
	if r.code != exitRolledBack || res.Outcome != outcomeRolledBack || res.RolledBack != b || res.Activated {
		t.Errorf("push --json of B: exit %d, %+v", r.code, res)
	}
	// A release built on B: refused as such, not as a stale parent.
	onB := bProject.clone(t)
	c := onB.add(t, "beta").Release
	checkRolledBack(t, pushBinary(t, bin, onB), c, b)
	if got := site.active(t); got != active {
		t.Fatalf("active after the refused pushes: %.12s, want %.12s", got, active)
	}

	switch then {
	case "force":
		// --force re-activates B knowingly.
		if r := pushBinary(t, bin, bProject, "--force"); r.code != 0 || site.active(t) != b || !strings.Contains(r.stdout, "recorded and activated") {
			t.Fatalf("push --force of B: %s", r)
		}
		// Then the release built on B pushes as any other.
		if r := pushBinary(t, bin, onB); r.code != 0 || site.active(t) != c {
			t.Fatalf("push of the release built on B after B was forced back: %s", r)
		}
	case "rebase":
		// A runner whose checkout is on B: push --rebase applies its change (beta) on the
		// active release, without B's (alpha), whose file a runner does not have.
		alpha, _ := filepath.Glob(filepath.Join(onB.dir, "debs", "alpha_*.deb"))
		for _, f := range alpha {
			if err := os.Remove(f); err != nil {
				t.Fatal(err)
			}
		}
		if r := pushBinary(t, bin, onB, "--rebase"); r.code != 0 || !strings.Contains(r.stderr, "which was rolled back: applying its change again") {
			t.Fatalf("push --rebase of the release built on B: %s", r)
		}
		m, err := manifest.Parse(site.activeManifest(t), "active")
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, p := range m.Packages {
			names = append(names, p.Name)
		}
		if m.Parent != active || !slices.Contains(names, "beta") || slices.Contains(names, "alpha") {
			t.Fatalf("after push --rebase: parent %.12s, packages %v; want on %.12s, beta without alpha", m.Parent, names, active)
		}
	case "build":
		// The next build starts from the active release, and its push activates.
		d := p.add(t, "gamma")
		if d.Parent != active {
			t.Fatalf("the build after armor rollback is built on %.12s, want the active %.12s", d.Parent, active)
		}
		if r := pushBinary(t, bin, p); r.code != 0 || site.active(t) != d.Release {
			t.Fatalf("push of the build after the rollback: %s", r)
		}
	}
}

// TestRollbackLocalManifestLeft: when the store cannot give the active release's
// manifest, the rollback still stands, exits 0, and says that the local manifest was
// left as it was and what to do about it; --json says the same.
func TestRollbackLocalManifestLeft(t *testing.T) {
	t.Parallel()
	bin := armorBinary(t)
	site := newControldSite(t)
	p := site.project(t)
	armorOK(t, "-c", p.cfg, "repos", "create")
	if r := pushBinary(t, bin, p); r.code != 0 {
		t.Fatalf("push of A: %s", r)
	}
	a := site.active(t)
	p.add(t, "alpha")
	if r := pushBinary(t, bin, p); r.code != 0 {
		t.Fatalf("push of B: %s", r)
	}
	before := readFileT(t, p.manifestPath())
	// The project now names an empty store.
	cfg := readFileT(t, p.cfg)
	empty := t.TempDir()
	cfg = bytes.Replace(cfg, []byte(fmt.Sprintf("remote = %q", site.remote)), []byte(fmt.Sprintf("remote = %q", empty)), 1)
	if err := os.WriteFile(p.cfg, cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := runBinary(bin, "--json", "-c", p.cfg, "rollback", "--pointer-only")
	if err != nil || r.code != 0 {
		t.Fatalf("rollback with an empty store: %v %s", err, r)
	}
	var out rollbackResult
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || out.Activation == nil {
		t.Fatalf("rollback --json: %v\n%s", err, r.stdout)
	}
	lm := out.LocalManifest
	if out.To != a || lm.Written || lm.Release != a || lm.Path != p.manifestPath() || !strings.Contains(lm.Left, empty) {
		t.Errorf("rollback --json: to %.12s, local manifest %+v; want to A, not written, naming the store", out.To, lm)
	}
	if site.active(t) != a {
		t.Errorf("the rollback did not stand")
	}
	if !bytes.Equal(readFileT(t, p.manifestPath()), before) {
		t.Errorf("the local manifest changed")
	}
	if _, err := os.Stat(filepath.Join(p.dir, testManifestName+".tmp")); err == nil {
		t.Errorf("a temporary manifest was left")
	}

	// As text, after another rollback state: push B again, roll back again.
	if r := pushBinary(t, bin, p, "--force"); r.code != 0 {
		t.Fatalf("push --force of B: %s", r)
	}
	text := armorOK(t, "-c", p.cfg, "rollback", "--pointer-only")
	for _, want := range []string{"local manifest " + p.manifestPath() + " NOT updated", empty,
		"before the next armor build, put the manifest of the active release " + a[:12] + " there"} {
		if !strings.Contains(text, want) {
			t.Errorf("rollback output lacks %q:\n%s", want, text)
		}
	}
}

// TestActivateRolledBack: armor activate of a rolled-back release, and a second rollback
// in a row (pointer-only or re-signed), which would bring it back, exit 4 and activate
// nothing; armor activate --force does it knowingly; activating an older release by hand
// marks the one it replaces as a rollback does.
func TestActivateRolledBack(t *testing.T) {
	t.Parallel()
	bin := armorBinary(t)
	site := newControldSite(t)
	p := site.project(t)
	armorOK(t, "-c", p.cfg, "repos", "create")
	if r := pushBinary(t, bin, p); r.code != 0 {
		t.Fatalf("push of A: %s", r)
	}
	a := site.active(t)
	b := p.add(t, "alpha").Release
	if r := pushBinary(t, bin, p); r.code != 0 {
		t.Fatalf("push of B: %s", r)
	}
	bProject := p.clone(t)
	armorOK(t, "-c", p.cfg, "rollback", "--pointer-only")
	if st := armorOK(t, "-c", p.cfg, "status"); !strings.Contains(st, "previous: "+b+", rolled back at ") || strings.Contains(st, "rollback would activate") {
		t.Errorf("armor status after the rollback does not say the previous release was rolled back:\n%s", st)
	}

	armorFails(t, exitRolledBack, []string{"release " + b[:12] + " was rolled back at ", "armor activate --force " + b[:12], "nothing was activated"},
		"-c", p.cfg, "activate", b[:12])
	for _, args := range [][]string{{"rollback", "--pointer-only"}, {"rollback"}} {
		armorFails(t, exitRolledBack, []string{"release " + b[:12] + " was rolled back at ", "rolling back again would re-activate it: armor activate --force " + b[:12]},
			append([]string{"-c", p.cfg}, args...)...)
	}
	if got := site.active(t); got != a {
		t.Fatalf("active after the refusals: %.12s, want A %.12s", got, a)
	}
	if out := armorOK(t, "-c", p.cfg, "activate", "--force", b[:12]); !strings.Contains(out, "activated "+b[:12]) {
		t.Errorf("activate --force: %s", out)
	}
	if got := site.active(t); got != b {
		t.Fatalf("active after activate --force: %.12s, want B %.12s", got, b)
	}

	// A by hand, over B: B is rolled back again, and a push of it is refused.
	armorOK(t, "-c", p.cfg, "activate", a[:12])
	checkRolledBack(t, pushBinary(t, bin, bProject), b, b)
	var rels []struct {
		ID         string `json:"id"`
		RolledBack *struct {
			ReplacedBy string `json:"replaced_by"`
		} `json:"rolled_back"`
	}
	if err := json.Unmarshal([]byte(armorOK(t, "--json", "-c", p.cfg, "releases", "list")), &rels); err != nil {
		t.Fatal(err)
	}
	for _, r := range rels {
		if marked := r.RolledBack != nil; marked != (r.ID == b) || marked && r.RolledBack.ReplacedBy != a {
			t.Errorf("releases list --json: %.12s rolled_back %+v; want only B, replaced by A", r.ID, r.RolledBack)
		}
	}
}

// TestRolledBackExitDocumented: armor --help and armor push --help document exit 4.
func TestRolledBackExitDocumented(t *testing.T) {
	unwrap := func(s string) string { return strings.Join(strings.Fields(s), " ") }
	if help := unwrap(armorOK(t, "--help")); !strings.Contains(help, fmt.Sprintf("%d an activation (push, activate, rollback) refused because the release, or one it is built on, was rolled back", exitRolledBack)) {
		t.Errorf("armor --help does not document exit status %d:\n%s", exitRolledBack, help)
	}
	if help := unwrap(armorOK(t, "push", "--help")); !strings.Contains(help, fmt.Sprintf("%d when it was refused because it, or a release it is built on, was rolled back", exitRolledBack)) ||
		!strings.Contains(help, "--force") {
		t.Errorf("armor push --help does not document exit status %d and --force:\n%s", exitRolledBack, help)
	}
}
