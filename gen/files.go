package gen

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path"
	"path/filepath"

	"github.com/armor-apt/armor/debian/release"
	"github.com/armor-apt/armor/manifest"
)

// Small facts about the files of a tree, which every stage asks: whether the tree still
// holds a file of the parent, what a Release of the parent lists, where a by-hash copy
// goes, and digests.

// previousReleaseSums reads the previous Release from the tree, if it is the one the
// parent lists, for the MD5 and SHA1 sums of reused indexes.
func previousReleaseSums(tree, rel string, prevFiles map[string]manifest.File) map[string]release.Digests {
	data, ok := previousFile(tree, rel, prevFiles)
	if !ok {
		return nil
	}
	f, err := release.Parse(data)
	if err != nil {
		return nil
	}
	return f.Sums
}

// previousFile returns the tree's copy of a file of the parent, if it still has the
// content the parent's manifest lists.
func previousFile(tree, rel string, prevFiles map[string]manifest.File) ([]byte, bool) {
	f, ok := prevFiles[rel]
	if !ok {
		return nil, false
	}
	data, err := os.ReadFile(filepath.Join(tree, filepath.FromSlash(rel)))
	if err != nil || int64(len(data)) != f.Size || sha256Hex(data) != f.SHA256 {
		return nil, false
	}
	return data, true
}

// inTree reports whether the tree holds f at its path with its size. A file of the parent
// is trusted by its size, as everywhere in a build (--verify rehashes).
func inTree(tree string, f manifest.File) bool {
	st, err := os.Stat(filepath.Join(tree, filepath.FromSlash(f.Path)))
	return err == nil && st.Size() == f.Size
}

// byHashPath is where the by-hash copy of the index at indexPath whose SHA-256 is sum goes.
func byHashPath(indexPath, sum string) string {
	return path.Dir(indexPath) + "/by-hash/SHA256/" + sum
}

// fileSHA256 returns the SHA-256 of the file at p, in hex.
func fileSHA256(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// fileHas reports whether the file at p has the digest sum.
func fileHas(p, sum string) bool {
	got, err := fileSHA256(p)
	return err == nil && got == sum
}

// sha256Hex returns the SHA-256 of data, in hex.
func sha256Hex(data []byte) string {
	s := sha256.Sum256(data)
	return hex.EncodeToString(s[:])
}
