package gen

import (
	"strings"

	"github.com/armor-apt/armor/debian/release"
	"github.com/armor-apt/armor/gen/index"
	"github.com/armor-apt/armor/gen/tree"
	"github.com/armor-apt/armor/manifest"
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

// writeInstallerIndex stages <component>/debian-installer/binary-<arch>/Packages when it
// is wanted (see optionalIndexes) or the parent had it; key.component holds the whole
// directory.
func writeInstallerIndex(o *Options, par *parent, s Suite, key indexKey, members, old []*manifest.Package, prevSums map[string]release.Digests, want bool,
	ins *inputSet, icache *index.Cache, tw *tree.Writer, si *suiteIndexes, out *indexesMade) error {
	dist := "dists/" + s.Codename + "/"
	rel := key.component + "/binary-" + key.arch + "/Packages"
	return writeOptionalIndex(o, par, dist, rel, members, old, prevSums, want, icache, tw, si, out, func() ([][]byte, error) {
		return indexStanzas(o.TreeDir, dist+rel, members, old, ins, par)
	})
}
