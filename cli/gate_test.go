package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/armor-apt/armor/internal/testkit/synth"
)

// writeDeb writes a synthetic package into the project's inputs.
func writeDeb(t *testing.T, proj, name, version, arch, depends string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(proj, "debs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := synth.WriteOne(filepath.Join(proj, "debs"), name, version, arch, depends); err != nil {
		t.Fatal(err)
	}
}

func TestBuildCheckRefuses(t *testing.T) {
	isolate(t)
	proj := t.TempDir()
	cfg := newProject(t, proj, projectOptions{archs: []string{"amd64"}, extra: ""})
	toml := readFileT(t, cfg)
	toml = []byte(strings.Replace(string(toml), "[suite.inputs]", "check = \"refuse\"\n\n[suite.inputs]", 1))
	if err := os.WriteFile(cfg, toml, 0o644); err != nil {
		t.Fatal(err)
	}
	writeDeb(t, proj, "libbar", "2.9", "amd64", "libc6")
	writeDeb(t, proj, "foo", "2.0", "amd64", "libc6 (>= 2.36), libbar (>= 3)")
	r := armorFails(t, 1, []string{
		"the check refused the release", "nothing was written",
		"foo 2.0 (amd64) in stable/main cannot be installed on amd64",
		"Depends: libbar (>= 3): libbar is 2.9 (amd64)",
	}, "-c", cfg, "build")
	for _, p := range []string{testManifestName, testTreeName} {
		if _, err := os.Stat(filepath.Join(proj, p)); !os.IsNotExist(err) {
			t.Fatalf("a refused build left %s: %v\n%s", p, err, r)
		}
	}

	// With the version it asks for, the release builds; libc6, which the repository does
	// not list at all, is reported.
	writeDeb(t, proj, "libbar", "3.0", "amd64", "libc6")
	out := armorOK(t, "-c", cfg, "build")
	if !strings.Contains(out, "names outside the repository are taken as met (libc6)") {
		t.Fatalf("the build does not report libc6:\n%s", out)
	}

	// A change is checked alone: one package added, one check.
	writeDeb(t, proj, "baz", "1", "all", "foo")
	var res struct {
		Check []struct {
			Checked int
			Broken  []any
		}
	}
	if err := json.Unmarshal([]byte(armorOK(t, "--json", "-c", cfg, "build")), &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Check) != 1 || res.Check[0].Checked != 1 || len(res.Check[0].Broken) != 0 {
		t.Fatalf("check of a one-package change: %+v", res.Check)
	}
}

func TestBuildCheckPolicies(t *testing.T) {
	for _, c := range []struct {
		name, setting, want string
	}{
		{"warn", `check = "warn"`, "check: warning: foo 2.0 (amd64) in stable/main cannot be installed on amd64"},
		{"default for an existing armor.toml", "", "check: warning: foo 2.0 (amd64)"},
		{"off", `check = "off"`, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			isolate(t)
			proj := t.TempDir()
			cfg := newProject(t, proj, projectOptions{archs: []string{"amd64"}})
			toml := strings.Replace(string(readFileT(t, cfg)), "[suite.inputs]", c.setting+"\n\n[suite.inputs]", 1)
			if err := os.WriteFile(cfg, []byte(toml), 0o644); err != nil {
				t.Fatal(err)
			}
			writeDeb(t, proj, "libbar", "2.9", "amd64", "")
			writeDeb(t, proj, "foo", "2.0", "amd64", "libbar (>= 3)")
			out := armorOK(t, "-c", cfg, "build")
			if c.want == "" && strings.Contains(out, "check:") || c.want != "" && !strings.Contains(out, c.want) {
				t.Fatalf("build output lacks %q (or says check: when off):\n%s", c.want, out)
			}
		})
	}
}

func TestBuildCheckBase(t *testing.T) {
	isolate(t)
	proj := t.TempDir()
	cfg := newProject(t, proj, projectOptions{archs: []string{"amd64"}})
	base := "Package: libc6\nVersion: 2.36-9\nArchitecture: amd64\nMulti-Arch: same\n\n"
	if err := os.WriteFile(filepath.Join(proj, "base-Packages"), []byte(base), 0o644); err != nil {
		t.Fatal(err)
	}
	toml := strings.Replace(string(readFileT(t, cfg)), "[suite.inputs]", "check = \"refuse\"\nbase = [\"base-Packages\"]\n\n[suite.inputs]", 1)
	if err := os.WriteFile(cfg, []byte(toml), 0o644); err != nil {
		t.Fatal(err)
	}
	writeDeb(t, proj, "ok", "1", "amd64", "libc6 (>= 2.36)")
	out := armorOK(t, "-c", cfg, "build")
	if strings.Contains(out, "taken as met") {
		t.Fatalf("with a base, nothing is taken from outside:\n%s", out)
	}
	writeDeb(t, proj, "new", "1", "amd64", "libc6 (>= 2.40), libssl3")
	armorFails(t, 1, []string{"new 1 (amd64)", "libc6 is 2.36-9 (amd64)"}, "-c", cfg, "build")
}

func TestCheckCommand(t *testing.T) {
	isolate(t)
	proj := t.TempDir()
	cfg := newProject(t, proj, projectOptions{archs: []string{"amd64", "arm64"}, noDebs: true})
	writeDeb(t, proj, "libbar", "2.9", "amd64", "")
	writeDeb(t, proj, "foo", "2.0", "all", "libbar")
	armorOK(t, "-c", cfg, "build") // the default policy warns
	r := armorFails(t, 1, []string{"check: 1 package checks fail"}, "-c", cfg, "check")
	if !strings.Contains(r.stdout, "foo 2.0 (all) in stable/main cannot be installed on arm64") ||
		!strings.Contains(r.stdout, "Depends: libbar: libbar is 2.9 (amd64), none of them for arm64") {
		t.Fatalf("armor check:\n%s", r)
	}
	writeDeb(t, proj, "libbar", "2.9", "arm64", "")
	armorOK(t, "-c", cfg, "build")
	out := armorOK(t, "-c", cfg, "check")
	if !strings.Contains(out, "stable: 4 package checks, 0 cannot be installed") {
		t.Fatalf("armor check:\n%s", out)
	}
}

// parseEach calls each j once, and on failure gives the error of the lowest j that
// failed, as the loop it replaces did, whichever core got there first.
func TestParseEach(t *testing.T) {
	for _, n := range []int{0, 1, 511, 512, 513, 5000} {
		var calls sync.Map
		if err := parseEach(n, func(j int) error {
			if _, dup := calls.LoadOrStore(j, true); dup {
				t.Errorf("n=%d: %d parsed twice", n, j)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		got := 0
		calls.Range(func(any, any) bool { got++; return true })
		if got != n {
			t.Errorf("n=%d: %d parsed", n, got)
		}
	}
	for _, bad := range [][]int{{0}, {4999}, {700, 3000}, {1023, 1024, 4000}} {
		err := parseEach(5000, func(j int) error {
			if slices.Contains(bad, j) {
				return fmt.Errorf("stanza %d", j)
			}
			return nil
		})
		if want := fmt.Sprintf("stanza %d", bad[0]); err == nil || err.Error() != want {
			t.Errorf("bad %v: error %v, want %s", bad, err, want)
		}
	}
}
