// Package lineage keeps the one fact a build and a push share about the chain of
// releases: which release built here controld has not recorded yet.
//
// A release is activated only on its parent, and controld records a release only if its
// parent is recorded. A build on a release built here and never pushed (armor remove,
// then armor add, then one push) therefore takes that release's parent as its own: the
// release in between was never published, and the new one holds its change too.
//
// The build cache's file "unrecorded" names the last release built here, with its parent,
// until Recorded says controld has it. It is a hint, written without fsync: a lost one
// makes the next build name the release it was built on, which controld then refuses as
// unrecorded, naming the command that rebuilds.
package lineage

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/armor-apt/armor/internal/atomicfile"
)

const file = "unrecorded"

// Parent returns the parent a release built on prev (id prevID, parent prevParent) names:
// prevID, unless prev was built in cacheDir and never recorded, then prev's own parent.
func Parent(cacheDir, prevID, prevParent string) string {
	data, err := os.ReadFile(filepath.Join(cacheDir, file))
	if err != nil {
		return prevID
	}
	id, parent, _ := strings.Cut(strings.TrimSpace(string(data)), " ")
	if id != prevID || parent != prevParent {
		return prevID
	}
	return parent
}

// Built remembers that the release id, built on parent, is not recorded yet.
func Built(cacheDir, id, parent string) {
	_ = atomicfile.WriteFileUnsynced(filepath.Join(cacheDir, file), []byte(id+" "+parent+"\n"), 0o644)
}

// Recorded tells the build cache in cacheDir that controld recorded the release id: the
// next build names it as its parent.
func Recorded(cacheDir, id string) error {
	p := filepath.Join(cacheDir, file)
	data, err := os.ReadFile(p)
	if err != nil {
		return nil
	}
	if got, _, _ := strings.Cut(strings.TrimSpace(string(data)), " "); got != id {
		return nil
	}
	if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
		return err
	}
	return nil
}
