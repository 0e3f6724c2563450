package cli

import (
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/armor-apt/armor/gen"
	"github.com/armor-apt/armor/internal/lineage"
	"github.com/armor-apt/armor/manifest"
)

// TestBuildDateAtOneEpoch: a pipeline that keeps SOURCE_DATE_EPOCH at its commit's time
// builds change after change, each release dated a second after its parent, and each
// reproduced by --verify-reproducible and armor rebuild (which ask for the date the
// build asked for, recorded as requested_date). A build at an older SOURCE_DATE_EPOCH
// (an older checkout) fails, saying why and what to do, and writes nothing.
func TestBuildDateAtOneEpoch(t *testing.T) {
	isolate(t)
	work := t.TempDir()
	proj := filepath.Join(work, "p")
	cfg := newProject(t, proj, projectOptions{store: filepath.Join(work, "store")})
	manifestPath := filepath.Join(proj, testManifestName)
	t.Setenv("SOURCE_DATE_EPOCH", testDate) // 2026-01-01T00:00:00Z
	armorOK(t, "-c", cfg, "build")
	for i, want := range []string{"2026-01-01T00:00:01Z", "2026-01-01T00:00:02Z"} {
		// Pushed and recorded, so the next change is built on it.
		armorOK(t, "-c", cfg, "push", "--store-only")
		parent := loadManifest(t, manifestPath)
		if err := lineage.Recorded(filepath.Join(proj, ".armor", "cache"), parent.ID); err != nil {
			t.Fatal(err)
		}
		parentFile := filepath.Join(work, "parent.toml")
		if err := os.WriteFile(parentFile, readFileT(t, manifestPath), 0o644); err != nil {
			t.Fatal(err)
		}

		writeDeb(t, proj, "change"+string(rune('a'+i)), "1.0", "amd64", "")
		if out := armorOK(t, "-c", cfg, "build", "--verify-reproducible"); !strings.Contains(out, "rebuilt byte for byte") {
			t.Fatalf("build --verify-reproducible:\n%s", out)
		}
		m := loadManifest(t, manifestPath)
		if m.Parent != parent.ID || m.Date != want || m.RequestedDate != "2026-01-01T00:00:00Z" {
			t.Fatalf("change %d: parent %.12s, date %s, requested_date %q; want parent %.12s, date %s, requested_date 2026-01-01T00:00:00Z",
				i, m.Parent, m.Date, m.RequestedDate, parent.ID, want)
		}
		if out := armorOK(t, "-c", cfg, "rebuild", "--parent", parentFile); !strings.Contains(out, "rebuilt byte for byte") {
			t.Fatalf("armor rebuild:\n%s", out)
		}
	}

	// An older checkout's SOURCE_DATE_EPOCH: refused, nothing written.
	t.Setenv("SOURCE_DATE_EPOCH", "1767225599") // 2025-12-31T23:59:59Z
	writeDeb(t, proj, "older", "1.0", "amd64", "")
	before := projectFiles(t, proj)
	r := armorFails(t, 1, []string{
		"this build's date 2025-12-31T23:59:59Z (from SOURCE_DATE_EPOCH=1767225599) is older than the date of its parent release",
		"2026-01-01T00:00:02Z (its build asked for 2026-01-01T00:00:00Z",
		"build from the checkout the parent was built from, or a newer one",
		"set SOURCE_DATE_EPOCH to a time after the parent's date, such as 1767225603",
	}, "-c", cfg, "build")
	t.Logf("the refusal:\n%s", r.stderr)
	if after := projectFiles(t, proj); !maps.Equal(before, after) {
		t.Errorf("the refused build changed the project:\nbefore %v\nafter  %v", before, after)
	}
}

// TestBuildDateSource: the build's date names where it came from, SOURCE_DATE_EPOCH
// first, then armor.toml's date, then the clock, for the error that refuses it.
func TestBuildDateSource(t *testing.T) {
	now := func() time.Time { return time.Date(2026, 5, 1, 10, 0, 0, 500, time.UTC) }
	tests := []struct {
		name, env, config string
		date              time.Time
		source            gen.DateSource
	}{
		{"SOURCE_DATE_EPOCH", testDate, "2026-02-01T00:00:00Z", time.Unix(1767225600, 0).UTC(), gen.DateFromEnv},
		{"armor.toml's date", "", "2026-02-01T00:00:00Z", time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC), gen.DateFromConfig},
		{"clock", "", "", now().Truncate(time.Second), gen.DateFromClock},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			isolate(t)
			if tt.env != "" {
				t.Setenv("SOURCE_DATE_EPOCH", tt.env)
			}
			date, source, err := buildDateFrom(now, tt.config)
			if err != nil || !date.Equal(tt.date) || source != tt.source {
				t.Errorf("buildDateFrom = %v, %v, %v; want %v, %v", date, source, err, tt.date, tt.source)
			}
		})
	}
}

// projectFiles hashes every file of a project but its build cache, by path, to show that
// a refused build wrote nothing.
func projectFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if rel, _ := filepath.Rel(dir, p); d.IsDir() && rel == filepath.Join(".armor", "cache") {
			return filepath.SkipDir
		}
		if d.Type().IsRegular() {
			sum := sha256.Sum256(readFileT(t, p))
			out[p] = hex.EncodeToString(sum[:])
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestRebaseAtOlderEpoch: two pipelines build on one release, each dated by its commit's
// SOURCE_DATE_EPOCH, and the newer commit's publishes first. The older one's push exits
// 3; its push --rebase applies its change on the newer release, dated a second after it
// with the date it asked for recorded (a lost race, not an older checkout), and armor
// rebuild reproduces that release from its parent.
func TestRebaseAtOlderEpoch(t *testing.T) {
	isolate(t)
	bin := armorBinary(t)
	site := newControldSite(t)
	t.Setenv("SOURCE_DATE_EPOCH", testDate) // 2026-01-01T00:00:00Z
	p := site.project(t)
	armorOK(t, "-c", p.cfg, "repos", "create")
	if r := pushBinary(t, bin, p); r.code != 0 {
		t.Fatalf("push of the first release: %s", r)
	}
	older := p.clone(t)
	t.Setenv("SOURCE_DATE_EPOCH", "1767229200") // 01:00:00, the newer commit
	newer := p.add(t, "newer").Release
	if r := pushBinary(t, bin, p); r.code != 0 || site.active(t) != newer {
		t.Fatalf("push of the newer commit's release: %s", r)
	}
	parentFile := filepath.Join(t.TempDir(), "parent.toml")
	if err := os.WriteFile(parentFile, site.activeManifest(t), 0o644); err != nil {
		t.Fatal(err)
	}

	t.Setenv("SOURCE_DATE_EPOCH", "1767225660") // 00:01:00, the older commit
	older.add(t, "older")
	if r := pushBinary(t, bin, older); r.code != exitStaleParent {
		t.Fatalf("push of the older commit's release on a stale parent: %s", r)
	}
	if r := pushBinary(t, bin, older, "--rebase"); r.code != 0 {
		t.Fatalf("push --rebase of the older commit's release: %s", r)
	}
	m, err := manifest.Parse(site.activeManifest(t), "active")
	if err != nil {
		t.Fatal(err)
	}
	if m.Parent != newer || m.Date != "2026-01-01T01:00:01Z" || m.RequestedDate != "2026-01-01T00:01:00Z" {
		t.Fatalf("the rebased release: parent %.12s, date %s, requested_date %q; want parent %.12s, date 2026-01-01T01:00:01Z, requested_date 2026-01-01T00:01:00Z",
			m.Parent, m.Date, m.RequestedDate, newer)
	}
	var names []string
	for _, pkg := range m.Packages {
		names = append(names, pkg.Name)
	}
	if !slices.Contains(names, "older") || !slices.Contains(names, "newer") {
		t.Fatalf("the rebased release lists %v, want both changes", names)
	}
	if out := armorOK(t, "-c", older.cfg, "rebuild", "--parent", parentFile); !strings.Contains(out, "rebuilt byte for byte") {
		t.Fatalf("armor rebuild of the rebased release:\n%s", out)
	}
}
