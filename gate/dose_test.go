package gate

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// needDose fails the test when dose-distcheck is missing.
func needDose(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("dose-distcheck"); err != nil {
		t.Fatalf("dose-distcheck is not installed: run .ci/install-deps (or apt-get install dose-distcheck): %v", err)
	}
}

// doseBroken runs dose-distcheck on a Packages file and returns the packages it finds
// broken, as "name version arch".
func doseBroken(t testing.TB, packages, native string, foreign ...string) map[string]bool {
	t.Helper()
	args := []string{"--deb-native-arch=" + native, "-f"}
	if len(foreign) > 0 {
		args = append(args, "--deb-foreign-archs="+strings.Join(foreign, ","))
	}
	cmd := exec.Command("dose-distcheck", append(args, "deb://"+packages)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var exit *exec.ExitError
	if err != nil && !(errors.As(err, &exit) && exit.ExitCode() == 1) {
		t.Fatalf("dose-distcheck %s: %v\n%s", packages, err, stderr.Bytes())
	}
	broken := map[string]bool{}
	var name, ver string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "  package: "):
			name = strings.TrimPrefix(line, "  package: ")
		case strings.HasPrefix(line, "  version: "):
			ver = strings.TrimPrefix(line, "  version: ")
		case strings.HasPrefix(line, "  architecture: "):
			broken[name+" "+ver+" "+strings.TrimPrefix(line, "  architecture: ")] = true
		}
	}
	return broken
}

// armorBroken checks every package of the file as dose-distcheck does.
func armorBroken(t testing.TB, data []byte, DoseAny bool, native string, foreign ...string) map[string]bool {
	t.Helper()
	pkgs, err := ReadPackages(data, "test")
	if err != nil {
		t.Fatal(err)
	}
	u := NewUniverse(pkgs, native, foreign...)
	u.DoseAny = DoseAny
	out := map[string]bool{}
	broken, err := NewChecker(u).Broken(context.Background(), u.All())
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range broken {
		p := u.Package(id)
		out[p.Name+" "+p.Version+" "+p.Architecture] = true
	}
	return out
}

// differences lists the packages the two verdicts disagree on.
func differences(armor, dose map[string]bool) []string {
	var out []string
	for k := range armor {
		if !dose[k] {
			out = append(out, k+": armor says broken, dose-distcheck installable")
		}
	}
	for k := range dose {
		if !armor[k] {
			out = append(out, k+": dose-distcheck says broken, armor installable")
		}
	}
	return out
}

// TestAgainstDoseGenerated compares armor's verdict with dose-distcheck's on 1,200
// generated repositories (amd64 with i386 as a foreign architecture): 1,100 run a
// hundred to a dose-distcheck run, and 100 with Essential packages, one to a run, as an
// Essential package binds every package beside it.
//
// Named difference, by design: "name:any". dose-distcheck 7 lets any package of the name
// meet it, whatever its Multi-Arch and whatever version the relation asks for; dpkg and
// apt take only a Multi-Arch: allowed package, in the version asked for. Where the two
// disagree, the case is checked again with dose's reading (DoseAny): it must then agree.
func TestAgainstDoseGenerated(t *testing.T) {
	needDose(t)
	dir := t.TempDir()
	if d := os.Getenv("GATE_KEEP"); d != "" {
		dir = d
	}
	r := rand.New(rand.NewPCG(32, 2026))
	total, byDesign, broken := 0, 0, 0
	run := func(name string, data []byte) {
		file := filepath.Join(dir, name)
		if err := os.WriteFile(file, data, 0o644); err != nil {
			t.Fatal(err)
		}
		want := doseBroken(t, file, "amd64", "i386")
		got := armorBroken(t, data, false, "amd64", "i386")
		broken += len(want)
		if diff := differences(got, want); len(diff) > 0 {
			byDesign += len(diff)
			if again := differences(armorBroken(t, data, true, "amd64", "i386"), want); len(again) > 0 {
				t.Errorf("%s: armor and dose-distcheck disagree beyond the named differences:\n%s\n(file kept at %s)", name, strings.Join(again, "\n"), file)
			}
		}
	}
	for batch := range 11 {
		var b strings.Builder
		for i := range 100 {
			b.WriteString(genCase(r, fmt.Sprintf("c%d-%d-", batch, i), false))
			total++
		}
		run(fmt.Sprintf("batch%d", batch), []byte(b.String()))
	}
	for i := range 100 {
		run(fmt.Sprintf("essential%d", i), []byte(genCase(r, fmt.Sprintf("e%d-", i), true)))
		total++
	}
	t.Logf("%d cases; dose-distcheck finds %d packages broken; %d verdicts differ by the named \":any\" difference", total, broken, byDesign)
	if broken == 0 {
		t.Fatal("no generated package is broken: the generator tests nothing")
	}
}
