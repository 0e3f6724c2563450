package gen

import (
	"encoding/binary"
	"hash/crc32"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/armor-apt/armor/debian/release"
	"github.com/armor-apt/armor/gen/index"
	"github.com/armor-apt/armor/internal/atomicfile"
	"github.com/armor-apt/armor/manifest"
)

// Uncompressed indexes. A suite publishes its Packages and Sources indexes compressed
// only, as .gz and .xz with their by-hash copies, and its Contents files as .gz, as
// Debian's archive does. Its Release
// still lists the uncompressed form's size and sums, as Debian's does: apt checks the
// data it decompresses against them, and a mirror that keeps indexes decompressed relies
// on them. apt never asks for the uncompressed form of an index whose compressed forms
// Release lists. At 100,000 packages the uncompressed Packages is 80 MB against 19 MB
// for its .gz and 17 MB for its .xz: not publishing it cuts what each release writes,
// uploads and keeps in the store by two thirds.
//
// The next build still needs the uncompressed index, for the stanzas of the packages
// it leaves as they are. The build cache keeps it under its SHA-256, written without an
// fsync and followed by its CRC-32C, which a torn write fails; a build that spliced the
// new index into the parent's copy rewrites that copy from the first change on. Without
// a usable copy the build decompresses the tree's .gz, as a fresh runner's hydrate does
// the store's.

// plainDirName is the directory of the build cache that keeps uncompressed indexes.
const plainDirName = "plain"

// plainMagic ends a kept index, after the CRC-32C of its bytes.
var plainMagic = [4]byte{'A', 'P', 'L', '1'}

const plainTrailer = 8 // CRC-32C and magic

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// stanzaIndexNames are the base names of the indexes a build takes stanzas from.
var stanzaIndexNames = []string{"Packages", "Sources"}

// isStanzaIndex reports whether a path of the tree names an uncompressed Packages or
// Sources index.
func isStanzaIndex(p string) bool { return slices.Contains(stanzaIndexNames, path.Base(p)) }

// isPlainIndex reports whether a path of the tree names an uncompressed index: Packages,
// Sources or Contents.
func isPlainIndex(p string) bool {
	b := path.Base(p)
	return isStanzaIndex(p) || (strings.HasPrefix(b, "Contents-") && !strings.Contains(b, "."))
}

func plainDir(cacheDir string) string { return filepath.Join(cacheDir, plainDirName) }

// keepPlain keeps data, an uncompressed index whose SHA-256 is sum, for the next build.
// Its failures cost the next build only time.
func keepPlain(cacheDir, sum string, data []byte) {
	dir := plainDir(cacheDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return
	}
	trailer := plainTrailerOf(data)
	_ = atomicfile.Write(filepath.Join(dir, sum), 0o644, false, func(w io.Writer) error {
		if _, err := w.Write(data); err != nil {
			return err
		}
		_, err := w.Write(trailer[:])
		return err
	})
}

func plainTrailerOf(data []byte) [plainTrailer]byte {
	var t [plainTrailer]byte
	binary.LittleEndian.PutUint32(t[:4], crc32.Checksum(data, castagnoli))
	copy(t[4:], plainMagic[:])
	return t
}

// keepPlainOver keeps data, whose SHA-256 is sum, by rewriting the kept copy of the
// index b names (by its sum) from where the two differ on (b.Head): the copy moves aside
// under a temporary name, takes the new bytes and trailer, and moves to its new name.
// Adding one package to 100,000 rewrites half of 80 MB on average, in pages the page
// cache holds already, where writing it whole allocates 80 MB of new pages and freeing
// the old copy as many. A build that stops half
// way leaves a temporary file, which the next removes; on an error the copy is gone, and
// keepPlain writes data whole.
func keepPlainOver(cacheDir, sum string, data []byte, b index.Base) error {
	dir := plainDir(cacheDir)
	tmp := filepath.Join(dir, atomicfile.TempPrefix+sum)
	if err := os.Rename(filepath.Join(dir, b.SHA256), tmp); err != nil {
		return err
	}
	f, err := os.OpenFile(tmp, os.O_WRONLY, 0)
	if err != nil {
		os.Remove(tmp)
		return err
	}
	trailer := plainTrailerOf(data)
	_, err = f.WriteAt(data[b.Head:], int64(b.Head))
	if err == nil {
		_, err = f.WriteAt(trailer[:], int64(len(data)))
	}
	if err == nil {
		err = f.Truncate(int64(len(data) + plainTrailer))
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, sum))
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

// keptPlain returns the kept uncompressed index of digests d, in an array with room
// beyond its end (index.PlainCap) for the next index to be spliced in its place; false
// if none is kept, or the copy is damaged.
func keptPlain(cacheDir string, d release.Digests) ([]byte, bool) {
	if !manifest.ValidDigest(d.SHA256) { // it names the file
		return nil, false
	}
	f, err := os.Open(filepath.Join(plainDir(cacheDir), d.SHA256))
	if err != nil {
		return nil, false
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || st.Size() != d.Size+plainTrailer {
		return nil, false
	}
	size := int(d.Size)
	buf := make([]byte, size+plainTrailer, max(index.PlainCap(size), size+plainTrailer))
	if _, err := io.ReadFull(f, buf); err != nil {
		return nil, false
	}
	data, trailer := buf[:size], buf[size:]
	if [4]byte(trailer[4:]) != plainMagic || binary.LittleEndian.Uint32(trailer[:4]) != crc32.Checksum(data, castagnoli) {
		return nil, false
	}
	return data, true
}

// keepPlains has the build cache keep the uncompressed indexes the build made, and only
// them, once the release is committed: written before, they would be flushed by the
// commit's syncfs (80 MB at 100,000 packages), which only the release's own files need.
// An index spliced in place from the parent's kept copy rewrites that copy where it
// changed (keepPlainOver). The other copies the Release files of the release no longer
// list are listed first, and removed while the new ones are written: freeing a file of
// 80 MB takes as long as writing one. The tree loses the uncompressed indexes an armor
// that published them left there: they no longer match their Release.
//
// A fresh runner (par.fresh) keeps none: its cache is most likely thrown away with it,
// and the copies are the largest files it would write (80 MB at 100,000 packages;
// docs/benchmarks.md has what that cost). A runner that keeps its cache decompresses the
// tree's .gz once in its second build, as the first did, and keeps the copies from then on.
func keepPlains(d dirs, suites []Suite, par *parent, plains []plainIndex, idx []suiteIndexes) {
	if par.fresh {
		plains = nil
	}
	stale := stalePlains(d, suites, idx)
	bases := map[string]index.Base{} // by the path of the index rewriting it
	claimed := map[string]bool{}
	for _, p := range plains {
		if b, ok := par.base(p.path); ok && b.Head > 0 && b.SHA256 != p.sum && slices.Contains(stale, b.SHA256) && !claimed[b.SHA256] {
			bases[p.path], claimed[b.SHA256] = b, true
		}
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for _, name := range stale {
			if !claimed[name] {
				os.Remove(filepath.Join(plainDir(d.cache), name))
			}
		}
	})
	for _, p := range plains {
		wg.Go(func() {
			if b, ok := bases[p.path]; ok && keepPlainOver(d.cache, p.sum, p.data, b) == nil {
				return
			}
			keepPlain(d.cache, p.sum, p.data)
		})
	}
	wg.Wait()
}

// stalePlains returns the names of the kept indexes that the Release files of suites (idx
// says what each lists) do not list, and removes the tree's uncompressed copies of those
// they list.
func stalePlains(d dirs, suites []Suite, idx []suiteIndexes) []string {
	keep := map[string]bool{}
	for i, si := range idx {
		for rel, sums := range si.sums {
			if !isPlainIndex(rel) {
				continue
			}
			keep[sums.SHA256] = true
			if i < len(suites) {
				os.Remove(filepath.Join(d.tree, "dists", suites[i].Codename, filepath.FromSlash(rel)))
			}
		}
	}
	entries, err := os.ReadDir(plainDir(d.cache))
	if err != nil {
		return nil
	}
	var stale []string
	for _, e := range entries {
		if !keep[e.Name()] {
			stale = append(stale, e.Name())
		}
	}
	return stale
}

// plainIndexes returns the uncompressed Packages, Sources and Contents indexes that prev's
// Release files in tree list, by path in the tree ("dists/stable/main/binary-amd64/Packages"):
// the indexes a build takes stanzas and file lists from. The Release files are read from the tree and must
// be those prev lists; a suite-name alias lists its codename's again, and is left out.
// An index prev publishes (made by an armor that published them) is one too.
func plainIndexes(tree string, aliases []string, prev *manifest.Manifest) map[string]release.Digests {
	out := map[string]release.Digests{}
	if prev == nil {
		return out
	}
	files := map[string]manifest.File{}
	for _, f := range prev.Files {
		if !strings.HasPrefix(f.Path, "dists/") || isAlias(aliases, f.Path) || strings.Contains(f.Path, "/by-hash/") {
			continue
		}
		switch {
		case path.Base(f.Path) == "Release" && strings.Count(f.Path, "/") == 2:
			files[f.Path] = f
		case isPlainIndex(f.Path):
			out[f.Path] = release.Digests{Size: f.Size, SHA256: f.SHA256}
		}
	}
	for p := range files {
		dist := path.Dir(p) + "/"
		for rel, d := range previousReleaseSums(tree, p, files) {
			if isPlainIndex(rel) {
				out[dist+rel] = d
			}
		}
	}
	return out
}

// parentPlain returns the parent's uncompressed index at indexPath, whose digests are
// d, in an array with room for a splice in place: the copy the cache keeps, or the
// tree's (a release armor published before it stopped publishing them), or the tree's
// .gz decompressed. Each is checked against d; false if none matches.
func parentPlain(dd dirs, indexPath string, d release.Digests) ([]byte, bool) {
	if data, ok := keptPlain(dd.cache, d); ok {
		return data, true
	}
	if d.SHA256 == "" {
		return nil, false
	}
	file := filepath.Join(dd.tree, filepath.FromSlash(indexPath))
	if data, err := readWithRoom(file); err == nil && int64(len(data)) == d.Size && sha256Hex(data) == d.SHA256 {
		return data, true
	}
	gz, err := os.ReadFile(file + ".gz")
	if err != nil {
		return nil, false
	}
	data, _, err := index.Gunzip(gz, int(d.Size))
	if err != nil || int64(len(data)) != d.Size || sha256Hex(data) != d.SHA256 {
		return nil, false
	}
	return data, true
}
