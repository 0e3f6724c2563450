package gen_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/armor-apt/armor/gen"
	"github.com/armor-apt/armor/internal/testkit/apttest"
	"github.com/armor-apt/armor/internal/testkit/synth"
)

// TestAptSuiteNames: a suite is published under its codename and its suite name, as
// Debian's archive is, so apt works with either in its sources, by hash too; and a
// NotAutomatic, ButAutomaticUpgrades suite (backports) does not win apt's candidate
// with a newer version.
func TestAptSuiteNames(t *testing.T) {
	r := newRepo(t, repoConfig{Synth: 4, Archs: []string{"amd64"}})
	r.Opts.Suites[0].Codename, r.Opts.Suites[0].Suite = "bookworm", "stable"
	r.Opts.Suites = append(r.Opts.Suites, gen.Suite{
		Codename: "bookworm-backports", Suite: "stable-backports", Components: []string{"main"}, Architectures: []string{"amd64"},
		Inputs:       map[string][]string{"main": {"bpo/*.deb"}},
		NotAutomatic: true, ButAutomaticUpgrades: true,
	})
	writeOne(t, r.in("tool"), "tool", "1.0-1", "amd64", "")
	writeOne(t, filepath.Join(r.Base, "bpo"), "tool", "2.0-1~bpo12+1", "amd64", "")
	m := r.mustBuild().Manifest
	if target, err := os.Readlink(r.tree("dists/stable")); err != nil || target != "bookworm" {
		t.Errorf("dists/stable: link to %q (%v), want a link to bookworm", target, err)
	}
	paths := m.Paths()
	for _, p := range []string{"InRelease", "main/binary-amd64/Packages.xz"} {
		a, b := paths["dists/bookworm/"+p], paths["dists/stable/"+p]
		if a.SHA256 == "" || a != b {
			t.Errorf("manifest: dists/stable/%s is %+v, dists/bookworm/%s %+v; want the same object", p, b, p, a)
		}
	}
	rel := string(readTree(t, r, "dists/bookworm-backports/Release"))
	for _, want := range []string{"\nNotAutomatic: yes\n", "\nButAutomaticUpgrades: yes\n"} {
		if !containsLine(rel, want) {
			t.Errorf("backports Release lacks %q:\n%s", want, rel)
		}
	}
	if rel := string(readTree(t, r, "dists/bookworm/Release")); containsLine(rel, "\nNotAutomatic: yes\n") {
		t.Errorf("stable's Release says NotAutomatic:\n%s", rel)
	}
	if again := r.mustBuild(); !again.UpToDate {
		t.Errorf("a rebuild with suite names is not up to date: %+v", again.Stats)
	}

	srv := serveTree(t, r.Opts.TreeDir)
	keyring := filepath.Join(t.TempDir(), "repo.gpg")
	writeFile(t, keyring, publicKeyring(t, r.Opts.Key))
	for _, suites := range [][]string{{"stable", "stable-backports"}, {"bookworm", "bookworm-backports"}} {
		t.Run(suites[0], func(t *testing.T) {
			a := apttest.New(t, apttest.Options{
				Sources: []apttest.Source{{URI: srv.URL, Suites: suites, Components: []string{"main"}, SignedBy: keyring}},
				ByHash:  "force",
			})
			a.Update(t)
			if v := a.Policy(t, "tool"); v != "1.0-1" {
				t.Errorf("apt's candidate for tool is %q, want 1.0-1 (backports is NotAutomatic)", v)
			}
			if v := a.Policy(t, synth.Name(0)); v == "" {
				t.Errorf("apt finds no %s through suite %s", synth.Name(0), suites[0])
			}
		})
	}
}

func containsLine(text, line string) bool { return strings.Contains("\n"+text, line) }
