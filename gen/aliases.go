package gen

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/armor-apt/armor/gen/tree"
	"github.com/armor-apt/armor/manifest"
)

// Debian's archive answers both dists/<codename>/ and dists/<suite>/ (dists/stable is a
// symbolic link to dists/bookworm), and users' sources name either. A suite whose Suite
// differs from its Codename is published under both: the manifest lists every file of
// dists/<codename>/ again under dists/<suite>/ (the same objects, so the store holds
// them once and an edge serves both paths), and the tree has dists/<suite> as a relative
// symbolic link to <codename>, as a static mirror expects.

// suiteAliases returns the manifest entries of every suite's files under its suite name.
func suiteAliases(suites []Suite, files []manifest.File) []manifest.File {
	var out []manifest.File
	for _, s := range suites {
		if s.Suite == s.Codename {
			continue
		}
		from, to := "dists/"+s.Codename+"/", "dists/"+s.Suite+"/"
		for _, f := range files {
			if rest, ok := strings.CutPrefix(f.Path, from); ok {
				out = append(out, manifest.File{Path: to + rest, Size: f.Size, SHA256: f.SHA256})
			}
		}
	}
	return out
}

// aliasDirs returns the dists/<suite>/ prefixes that are aliases of a codename.
func aliasDirs(suites []Suite) []string {
	var out []string
	for _, s := range suites {
		if s.Suite != s.Codename {
			out = append(out, "dists/"+s.Suite+"/")
		}
	}
	return out
}

// isAlias reports whether a tree path lies under one of the suite-name alias directories
// aliasDirs lists.
func isAlias(dirs []string, p string) bool {
	for _, d := range dirs {
		if strings.HasPrefix(p, d) {
			return true
		}
	}
	return false
}

// linkAliases makes dists/<suite> a symbolic link to <codename> for every suite whose
// names differ. An existing link to the codename is kept; a link elsewhere is replaced
// atomically; anything else there is an error naming it. A build failing later puts the
// old links back (tree.Writer.Rollback).
func linkAliases(suites []Suite, tw *tree.Writer) error {
	for _, s := range suites {
		if s.Suite == s.Codename {
			continue
		}
		err := tw.Symlink("dists/"+s.Suite, s.Codename)
		if errors.Is(err, tree.ErrNotLink) {
			return fmt.Errorf("%s: the suite name %s of %s must be a symbolic link to %s, but it is not one: remove it",
				filepath.Join(tw.Root(), "dists", s.Suite), s.Suite, s.Codename, s.Codename)
		}
		if err != nil {
			return err
		}
	}
	return nil
}
