package base

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/armor-apt/armor/gate"
)

func needDose(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("dose-distcheck"); err != nil {
		t.Fatalf("dose-distcheck is not installed: run .ci/install-deps (or apt-get install dose-distcheck): %v", err)
	}
}

// keptDoseVerdict returns dose-distcheck's broken packages for the file, from the copy
// kept under sum and dose's version, or by running it (and keeping the result).
func keptDoseVerdict(t testing.TB, file, sum string) map[string]bool {
	t.Helper()
	ver, err := exec.Command("dose-distcheck", "--version").Output()
	if err != nil {
		t.Fatalf("dose-distcheck --version: %v", err)
	}
	kept := fmt.Sprintf("%s.dose-%s", file, sha256Hex(ver)[:12])
	if data, err := os.ReadFile(kept); err == nil {
		out := map[string]bool{}
		for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			if l != "" {
				out[l] = true
			}
		}
		return out
	}
	cmd := exec.Command("dose-distcheck", "--deb-native-arch=amd64", "-f", "deb://"+file)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var exit *exec.ExitError
	if err != nil && !(errors.As(err, &exit) && exit.ExitCode() == 1) {
		t.Fatalf("dose-distcheck %s: %v\n%s", file, err, stderr.Bytes())
	}
	broken := map[string]bool{}
	var name, version string
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "  package: "):
			name = strings.TrimPrefix(line, "  package: ")
		case strings.HasPrefix(line, "  version: "):
			version = strings.TrimPrefix(line, "  version: ")
		case strings.HasPrefix(line, "  architecture: "):
			broken[name+" "+version+" "+strings.TrimPrefix(line, "  architecture: ")] = true
		}
	}
	var lines []string
	for k := range broken {
		lines = append(lines, k)
	}
	slices.Sort(lines)
	_ = os.WriteFile(kept, []byte(strings.Join(lines, "\n")+"\n"), 0o644)
	return broken
}

// armorVerdict checks every package of a Packages index on amd64, as dose-distcheck does.
func armorVerdict(t testing.TB, data []byte, doseAny bool) map[string]bool {
	t.Helper()
	pkgs, err := gate.ReadPackages(data, "bookworm")
	if err != nil {
		t.Fatal(err)
	}
	u := gate.NewUniverse(pkgs, "amd64")
	u.DoseAny = doseAny
	out := map[string]bool{}
	broken, err := gate.NewChecker(u).Broken(context.Background(), u.All())
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range broken {
		p := u.Package(id)
		out[p.Name+" "+p.Version+" "+p.Architecture] = true
	}
	return out
}

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
	slices.Sort(out)
	return out
}
