package gen_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/armor-apt/armor/gen"
	"github.com/armor-apt/armor/internal/testkit/apttest"
	"github.com/armor-apt/armor/manifest"
)

// TestPhase: armor phase sets a version's Phased-Update-Percentage in its stanza without
// touching the package, keeps it across builds (from the parent on a fresh runner too),
// apt sees it, and it can be cleared; an unknown version changes nothing.
func TestPhase(t *testing.T) {
	r := newRepo(t, repoConfig{Synth: 2, Archs: []string{"amd64"}})
	writeOne(t, r.in("tool"), "tool", "1.0-1", "amd64", "")
	writeOne(t, r.in("tool"), "tool", "1.1-1", "amd64", "")
	first := r.mustBuild().Manifest

	r.Opts.Phase = []gen.Phase{{Name: "tool", Version: "1.1-1", Percent: "0"}}
	res := r.mustBuild()
	if res.Stats.FilesWritten == 0 || res.Stats.Read != 0 {
		t.Errorf("phasing: stats %+v; want the index rewritten and no package read", res.Stats)
	}
	st := stanzaOf(t, readIndex(t, r, "dists/stable/main/binary-amd64/Packages"), "tool", "1.1-1")
	if !strings.Contains(st, "\nPhased-Update-Percentage: 0\nFilename: ") {
		t.Errorf("stanza of tool 1.1-1:\n%s", st)
	}
	if other := stanzaOf(t, readIndex(t, r, "dists/stable/main/binary-amd64/Packages"), "tool", "1.0-1"); strings.Contains(other, "Phased") {
		t.Errorf("tool 1.0-1 is phased too:\n%s", other)
	}

	srv := serveTree(t, r.Opts.TreeDir)
	keyring := filepath.Join(t.TempDir(), "repo.gpg")
	writeFile(t, keyring, publicKeyring(t, r.Opts.Key))
	a := apttest.New(t, apttest.Options{Sources: []apttest.Source{{URI: srv.URL, Suites: []string{"stable"}, Components: []string{"main"}, SignedBy: keyring}}})
	a.Update(t)
	if out, err := a.CacheCmd("policy", "tool").CombinedOutput(); err != nil || !strings.Contains(string(out), "phased 0%") {
		t.Errorf("apt-cache policy tool does not show the phasing: %v\n%s", err, out)
	}

	// Kept by the next builds, also on a fresh runner that reads it from the parent.
	r.Opts.Phase = nil
	if again := r.mustBuild(); !again.UpToDate {
		t.Errorf("a build after phasing is not up to date: %+v", again.Stats)
	}
	st2 := storeOf(t, r.Opts.TreeDir, r.Last)
	f := freshRunner(t, r)
	f.Opts.Fetch = st2.fetch
	writeOne(t, f.in("x"), "other", "1.0", "amd64", "")
	got := f.mustBuild().Manifest
	for _, p := range got.Packages {
		if p.Name == "tool" && (p.Version == "1.1-1") != (p.Phased == "0") {
			t.Errorf("fresh runner: tool %s phased %q", p.Version, p.Phased)
		}
	}

	r.Opts.Phase = []gen.Phase{{Name: "tool", Version: "9.9", Percent: "10"}}
	if _, err := r.build(); !errors.Is(err, gen.ErrNotFound) {
		t.Errorf("phasing a version that is not there: %v, want ErrNotFound", err)
	}
	r.Opts.Phase = []gen.Phase{{Name: "tool", Version: "1.1-1", Percent: "100"}}
	if _, err := r.build(); err == nil || !strings.Contains(err.Error(), "not a percentage from 0 to 99") {
		t.Errorf("phasing at 100: %v, want an error", err)
	}
	r.Opts.Phase = []gen.Phase{{Name: "tool", Version: "1.1-1"}}
	cleared := r.mustBuild().Manifest
	if !manifest.EqualPackages(cleared.Packages, first.Packages) {
		t.Error("clearing the phasing did not give back the packages of the first release")
	}
}
