package gen

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/armor-apt/armor/internal/atomicfile"
	"github.com/armor-apt/armor/manifest"
)

// A release is activated only on its parent, and controld records a release only if its
// parent is recorded. A build on a release built here and never pushed (armor remove,
// then armor add, then one push) therefore takes that release's parent as its own: the
// release in between was never published, and the new one holds its change too.
//
// The build cache's unrecordedFile names the last release built here, with its parent,
// until Recorded says controld has it.

const unrecordedFile = "unrecorded"

// recordedAncestor is the parent a release built on prev names: prev, unless prev was
// built here and never recorded, then prev's own parent.
func recordedAncestor(o *Options, prev *manifest.Manifest) string {
	data, err := os.ReadFile(filepath.Join(o.CacheDir, unrecordedFile))
	if err != nil {
		return prev.ID
	}
	id, parent, _ := strings.Cut(strings.TrimSpace(string(data)), " ")
	if id != prev.ID || parent != prev.Parent {
		return prev.ID
	}
	return parent
}

func writeUnrecorded(o *Options, m *manifest.Manifest) {
	_ = atomicfile.WriteFileUnsynced(filepath.Join(o.CacheDir, unrecordedFile), []byte(m.ID+" "+m.Parent+"\n"), 0o644)
}

// Recorded tells the build cache in cacheDir that controld recorded the release id: the
// next build names it as its parent.
func Recorded(cacheDir, id string) error {
	p := filepath.Join(cacheDir, unrecordedFile)
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
