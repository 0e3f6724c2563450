package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/armor-apt/armor/internal/lineage"
)

// TestReproducibleChange builds a change three ways, at one SOURCE_DATE_EPOCH with one
// key: warm (in the directory that built the parent), on a fresh runner (a checkout of
// armor.toml, the parent's manifest and the new .deb, the parent's files in the store),
// and with armor rebuild; the manifests are the same bytes, and so is every file the
// trees share. armor rebuild with another key says what differs, and fails.
func TestReproducibleChange(t *testing.T) {
	isolate(t)
	work := t.TempDir()
	store := filepath.Join(work, "store")
	warm := filepath.Join(work, "warm")
	cfg := newProject(t, warm, projectOptions{store: store})
	t.Setenv("SOURCE_DATE_EPOCH", testDate)
	armorOK(t, "-c", cfg, "build")
	armorOK(t, "-c", cfg, "push", "--store-only")
	parent := loadManifest(t, filepath.Join(warm, testManifestName))
	// As armor push does once controld has recorded it.
	if err := lineage.Recorded(filepath.Join(warm, ".armor", "cache"), parent.ID); err != nil {
		t.Fatal(err)
	}
	parentFile := filepath.Join(work, "parent.toml")
	if err := os.WriteFile(parentFile, readFileT(t, filepath.Join(warm, testManifestName)), 0o644); err != nil {
		t.Fatal(err)
	}

	// The fresh runner's checkout, before the change is built anywhere.
	fresh := filepath.Join(work, "fresh")
	freshCfg := newProject(t, fresh, projectOptions{store: store, noDebs: true})
	if err := os.WriteFile(filepath.Join(fresh, testManifestName), readFileT(t, parentFile), 0o644); err != nil {
		t.Fatal(err)
	}

	t.Setenv("SOURCE_DATE_EPOCH", "1767312000") // a day later
	writeDeb(t, warm, "newpkg", "1.0", "amd64", "")
	writeDeb(t, fresh, "newpkg", "1.0", "amd64", "")
	out := armorOK(t, "-c", cfg, "build", "--verify-reproducible")
	if !strings.Contains(out, "rebuilt byte for byte") {
		t.Fatalf("build --verify-reproducible:\n%s", out)
	}
	armorOK(t, "-c", freshCfg, "build")
	built := readFileT(t, filepath.Join(warm, testManifestName))
	if got := readFileT(t, filepath.Join(fresh, testManifestName)); string(got) != string(built) {
		t.Fatalf("the fresh runner's manifest differs from the warm build's:\n%s\n---\n%s", got, built)
	}
	// The fresh runner's tree holds the new release's dists/ and the new pool file: each
	// is byte for byte the warm tree's.
	n := 0
	err := filepath.WalkDir(filepath.Join(fresh, testTreeName), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(filepath.Join(fresh, testTreeName), p)
		if string(readFileT(t, p)) != string(readFileT(t, filepath.Join(warm, testTreeName, rel))) {
			t.Errorf("%s differs between the fresh runner and the warm build", rel)
		}
		n++
		return nil
	})
	if err != nil || n < 10 {
		t.Fatalf("compared %d files: %v", n, err)
	}

	out = armorOK(t, "-c", cfg, "rebuild", "--parent", parentFile)
	if !strings.Contains(out, "rebuilt byte for byte") {
		t.Fatalf("armor rebuild:\n%s", out)
	}
	// Another key signs otherwise: the rebuild says so.
	other := strings.Replace(string(readFileT(t, cfg)), abs(t, eddsaKey), abs(t, "../testdata/keys/rsa.sec.asc"), 1)
	if err := os.WriteFile(cfg, []byte(other), 0o644); err != nil {
		t.Fatal(err)
	}
	r := armorFails(t, 1, []string{"is not reproduced"}, "-c", cfg, "rebuild", "--parent", parentFile)
	if !strings.Contains(r.stdout, "InRelease") || !strings.Contains(r.stdout, "the manifest") {
		t.Fatalf("armor rebuild with another key:\n%s", r)
	}
}
