package gen

import (
	"strings"

	"github.com/armor-apt/armor/debian/release"
)

// Installer and debug packages. A .udeb (a package of the Debian installer) keeps its
// extension in the pool and is listed only in <component>/debian-installer/binary-<arch>/
// Packages, never in the index apt installs from on a normal system. A .ddeb (a debug
// package) keeps its extension too and is listed in the regular index, as Ubuntu's debug
// archives list them. Which a package is follows from its input's extension, and then
// from its pool path.

const installerDir = "/debian-installer"

// isInstaller reports whether a pool path is an installer package's.
func isInstaller(poolPath string) bool { return strings.HasSuffix(poolPath, ".udeb") }

// installer stages <component>/debian-installer/binary-<arch>/Packages when want (the
// suite has installer packages; see optionalIndexes) or the parent had it; key.component
// holds the whole directory.
func (w *indexWriter) installer(s Suite, key indexKey, prevSums map[string]release.Digests, want bool, si *suiteIndexes) error {
	dist := "dists/" + s.Codename + "/"
	rel := key.component + "/binary-" + key.arch + "/Packages"
	return w.write(dist, rel, key, prevSums, want, si, func() ([][]byte, error) {
		return indexStanzas(w.tree, dist+rel, w.members[key], w.prevMembers[key], w.ins, w.par)
	})
}
