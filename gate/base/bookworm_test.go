package base

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// aptSource returns the APT source line of the Debian suite this machine's apt takes
// bookworm main from, as `apt-get indextargets` reports it: the test reaches Debian
// through the mirror apt uses here, never a host of its own choosing.
func aptSource(t testing.TB) string {
	t.Helper()
	out, err := exec.Command("apt-get", "indextargets", "--format", "$(REPO_URI) $(RELEASE)",
		"Identifier: Packages", "Codename: bookworm", "Component: main", "Architecture: amd64").Output()
	if err != nil {
		t.Fatalf("apt-get indextargets: %v (the test needs apt configured for Debian bookworm main amd64, and apt-get update run once)", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if uri, suite, ok := strings.Cut(line, " "); ok && suite == "bookworm" {
			return "deb " + uri + " bookworm main"
		}
	}
	t.Fatalf("apt on this machine has no source for bookworm main amd64 (add one to /etc/apt/sources.list.d and run apt-get update); it reports:\n%s", out)
	return ""
}

// testCache is where the tests keep what they fetch, across runs: the user's cache
// directory, so that a second run (and a CI run on the same machine) fetches nothing.
func testCache(t testing.TB) string {
	t.Helper()
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	return filepath.Join(dir, "armor-test", "base")
}

// Bookworm returns bookworm main amd64's Packages index, fetched through the loader
// (InRelease verified with the system's APT keys, the index by its signed SHA-256) and
// kept by hash.
func bookworm(t testing.TB) []byte {
	t.Helper()
	src, err := Parse(aptSource(t), "")
	if err != nil {
		t.Fatal(err)
	}
	l := &Loader{Cache: testCache(t)}
	idx, err := l.aptIndexes(context.Background(), src, "amd64")
	if err != nil {
		t.Fatalf("fetch bookworm main amd64: %v", err)
	}
	var all [][]byte
	for _, x := range idx {
		all = append(all, x.data)
	}
	return bytes.Join(all, []byte("\n"))
}

// TestAgainstDoseBookworm compares armor's verdict on every package of Debian bookworm
// main amd64 with dose-distcheck's. dose-distcheck takes minutes on it, so its verdict
// is kept beside the index, under the index's SHA-256 and dose's version: the same input
// gives the same verdict, and a new index or a new dose runs it again.
func TestAgainstDoseBookworm(t *testing.T) {
	needDose(t)
	data := bookworm(t)
	sum := sha256Hex(data)
	dir := testCache(t)
	file := filepath.Join(dir, "bookworm-main-amd64-"+sum)
	if _, err := os.Stat(file); err != nil {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want := keptDoseVerdict(t, file, sum)
	got := armorVerdict(t, data, false)
	diff := differences(got, want)
	if len(diff) > 0 {
		t.Logf("%d verdicts differ; checking them with dose's reading of \":any\"", len(diff))
		if again := differences(armorVerdict(t, data, true), want); len(again) > 0 {
			t.Fatalf("armor and dose-distcheck disagree on bookworm main amd64:\n%s", strings.Join(again, "\n"))
		}
	}
	t.Logf("%d packages broken by both; %d differ by the named \":any\" difference", len(want), len(diff))
	if len(want) == 0 {
		t.Fatal("dose-distcheck finds nothing broken in bookworm: its output was not read")
	}
}
