package cli

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestPhaseCommand: armor phase records the share in the manifest and the stanza, 100
// ends it, and a version that is not there is an error that changes nothing.
func TestPhaseCommand(t *testing.T) {
	isolate(t)
	proj := t.TempDir()
	cfg := newProject(t, proj, projectOptions{})
	armorOK(t, "-c", cfg, "build")
	m := loadManifest(t, filepath.Join(proj, testManifestName))
	p := m.Packages[0]
	armorOK(t, "-c", cfg, "phase", p.Name, p.Version, "10")
	if got := loadManifest(t, filepath.Join(proj, testManifestName)).Packages[0].Phased; got != "10" {
		t.Errorf("manifest: phased %q, want 10", got)
	}
	packages := string(gunzipT(t, readFileT(t, filepath.Join(proj, testTreeName, "dists", testCodename, "main", "binary-"+archOf(p.Architecture), "Packages.gz"))))
	if !strings.Contains(packages, "Package: "+p.Name+"\n") || !strings.Contains(packages, "\nPhased-Update-Percentage: 10\n") {
		t.Errorf("Packages lacks the phasing of %s:\n%s", p.Name, packages)
	}
	armorFails(t, 1, []string{"phase " + p.Name + " 9.9", "no such package"}, "-c", cfg, "phase", p.Name, "9.9", "50")
	armorFails(t, 2, nil, "-c", cfg, "phase", p.Name, p.Version, "ten")
	armorOK(t, "-c", cfg, "phase", p.Name, p.Version, "100")
	if got := loadManifest(t, filepath.Join(proj, testManifestName)).Packages[0].Phased; got != "" {
		t.Errorf("after 100%%: phased %q, want none", got)
	}
}

func archOf(a string) string {
	if a == "all" {
		return "amd64"
	}
	return a
}
