package gate

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/armor-apt/armor/internal/testkit/apttest"
)

// TestAnyAgreesWithApt holds the one difference from dose-distcheck by design to real
// apt-get: for each package of a flat repository, armor's verdict equals whether
// `apt-get install -s` can install it, where dose-distcheck would call every one
// installable.
func TestAnyAgreesWithApt(t *testing.T) {
	const packages = `Package: wants-newer-any
Version: 1
Architecture: amd64
Depends: allowed:any (>= 5)

Package: wants-any
Version: 1
Architecture: amd64
Depends: allowed:any (>= 1)

Package: allowed
Version: 1
Architecture: amd64
Multi-Arch: allowed

Package: wants-plain-any
Version: 1
Architecture: amd64
Depends: plain:any

Package: plain
Version: 1
Architecture: amd64

Package: wants-virtual-any
Version: 1
Architecture: all
Depends: virt:any

Package: provider
Version: 1
Architecture: amd64
Multi-Arch: allowed
Provides: virt
`
	dir := t.TempDir()
	var b strings.Builder
	for _, st := range strings.Split(packages, "\n\n") {
		name := strings.TrimPrefix(strings.SplitN(st, "\n", 2)[0], "Package: ")
		fmt.Fprintf(&b, "%s\nFilename: %s.deb\nSize: 1\nDescription: test\n\n", strings.TrimSpace(st), name)
	}
	if err := os.WriteFile(filepath.Join(dir, "Packages"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	apt := apttest.New(t, apttest.Options{Sources: []apttest.Source{{URI: "file:" + dir, Suites: []string{"./"}}}})
	// A flat repository without a Release file: apt notes the files it lacks, and reads
	// the Packages file all the same.
	if out, err := apt.Cmd("update").CombinedOutput(); err != nil {
		t.Fatalf("apt-get update: %v\n%s", err, out)
	}

	u := universeOf(t, packages)
	c := NewChecker(u)
	for _, name := range []string{"wants-newer-any", "wants-any", "wants-plain-any", "wants-virtual-any", "allowed", "plain"} {
		out, err := apt.Cmd("-s", "install", name).CombinedOutput()
		aptOK := err == nil
		if got, err := c.Installable(context.Background(), u.Lookup(name)[0]); err != nil || got != aptOK {
			t.Errorf("%s: armor says installable=%v, apt-get says %v:\n%s", name, got, aptOK, out)
		}
	}
}
