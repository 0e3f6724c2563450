package cli_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/armor-apt/armor/internal/testkit/apttest"
)

// TestEdgeAptFile: through a real edged, apt-get update with apt-file's index targets
// fetches the Contents file armor build published and armor push uploaded, and
// apt-file search finds a file of a published package; after an incremental build and
// push that add a package, it finds that package's file as well.
func TestEdgeAptFile(t *testing.T) {
	for _, tool := range []string{"apt-file", "apt-get"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed: run .ci/install-deps", tool)
		}
	}
	targets, err := os.ReadFile("/etc/apt/apt.conf.d/50apt-file.conf")
	if err != nil {
		t.Fatalf("apt-file's index targets: %v (run .ci/install-deps)", err)
	}
	c := newCluster(t)
	p := c.newProject(t, "files", "apt.files.test")
	p.setDebs(t, []pkg{{"files-one", "1.0-1", ""}})
	p.build(t)
	p.push(t, c)
	waitServed(t, c.edge, p.host, p.tree())

	apt := apttest.New(t, apttest.Options{Sources: []apttest.Source{p.source()}, Proxy: "http://" + c.edge})
	if err := os.WriteFile(filepath.Join(apt.Root, "etc/apt.conf.d/50apt-file.conf"), targets, 0o644); err != nil {
		t.Fatal(err)
	}
	search := func(pattern string) string {
		t.Helper()
		cmd := exec.Command("apt-file", "search", pattern)
		cmd.Env = append(os.Environ(), "APT_CONFIG="+filepath.Join(apt.Root, "etc/apt.conf"), "LC_ALL=C")
		out, _ := cmd.CombinedOutput() // no match exits 1; the output says what happened
		return string(out)
	}
	if out := apt.Update(t); !strings.Contains(out, "amd64 Contents (deb)") {
		t.Errorf("apt-get update did not fetch Contents-amd64:\n%s", out)
	}
	if out := search("/usr/share/doc/files-one/README"); !strings.Contains(out, "files-one: /usr/share/doc/files-one/README") {
		t.Errorf("apt-file search through the edge:\n%s", out)
	}

	p.setDebs(t, []pkg{{"files-one", "1.0-1", ""}, {"files-two", "2.0-1", "files-one"}})
	p.build(t)
	p.push(t, c)
	waitServed(t, c.edge, p.host, p.tree())
	apt.Update(t)
	for _, name := range []string{"files-one", "files-two"} {
		if out := search("/usr/share/doc/" + name + "/README"); !strings.Contains(out, name+": /usr/share/doc/"+name+"/README") {
			t.Errorf("after the incremental push, apt-file search for %s's file:\n%s", name, out)
		}
	}
}
