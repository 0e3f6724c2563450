package gen

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/armor-apt/armor/gen/index"
	"github.com/armor-apt/armor/internal/atomicfile"
	"github.com/armor-apt/armor/manifest"
	"golang.org/x/sync/errgroup"
)

// A build reuses what the tree holds of its parent: Packages stanzas, unchanged indexes,
// the Release files' sums. A fresh CI runner's tree is empty, and a parent taken from
// controld is not the release the tree holds; hydrate then fetches the parent's dists/
// files from the store by hash, so the build proceeds as on the machine that made the
// parent. Pool files are never fetched: the parent's are in the store already, and the
// release lists them as they are.
//
// The tree marker (treeMarker in the build cache) names the release the tree holds once a
// build committed it or hydrate completed it. With the marker naming the parent, a file of
// the right size is trusted, as everywhere else in the build; without it, every file is
// checked against its digest.

const treeMarker = "tree-release"

// hydrate makes the tree hold prev's dists/ files. Without Options.Fetch it leaves the
// tree as it is: the build then reads what it needs from its inputs, as it always did.
// The plain Packages indexes it writes it also hands to the build, which reads them next:
// read back from the tree, they would be a second copy of the largest files of the
// release in memory.
func hydrate(ctx context.Context, o *Options, prev *manifest.Manifest, made *madeIndexes) error {
	if prev == nil {
		return nil
	}
	trusted := readTreeMarker(o) == prev.ID
	aliases := aliasDirs(o)
	var todo []manifest.File
	for _, f := range prev.Files {
		if !strings.HasPrefix(f.Path, "dists/") || isAlias(aliases, f.Path) {
			continue // a suite name's files are its codename's, through a link
		}
		if inTree(o.TreeDir, f) && (trusted || fileHas(filepath.Join(o.TreeDir, filepath.FromSlash(f.Path)), f.SHA256)) {
			continue
		}
		todo = append(todo, f)
	}
	if len(todo) == 0 {
		if !trusted {
			writeTreeMarker(o, prev.ID)
		}
		return nil
	}
	if o.Fetch == nil {
		return nil
	}
	if err := fetchFiles(ctx, o, prev, todo, made); err != nil {
		return err
	}
	writeTreeMarker(o, prev.ID)
	return nil
}

// fetchFiles writes files of prev into the tree from the store, each object fetched once.
// A plain Packages index is made from its .gz, which the tree needs anyway, when they
// agree: it is the largest file of a suite, four or five times its .gz.
func fetchFiles(ctx context.Context, o *Options, prev *manifest.Manifest, todo []manifest.File, made *madeIndexes) error {
	bySum := map[string][]string{} // digest → tree paths
	var sums []string
	for _, f := range todo {
		if bySum[f.SHA256] == nil {
			sums = append(sums, f.SHA256)
		}
		bySum[f.SHA256] = append(bySum[f.SHA256], f.Path)
	}
	all := map[string]manifest.File{}
	for _, f := range prev.Files {
		all[f.Path] = f
	}
	// Plain indexes whose .gz is fetched too are derived from it.
	derived := map[string]string{} // plain digest → gz digest
	for _, f := range todo {
		gz, ok := all[f.Path+".gz"]
		if strings.HasSuffix(f.Path, "/Packages") && ok && bySum[gz.SHA256] != nil {
			derived[f.SHA256] = gz.SHA256
		}
	}
	var mu sync.Mutex
	got := map[string][]byte{}
	// Each content is written once, unsynced, and its other paths (its by-hash copy) are
	// links to it, as the build makes them; one flush of the file system follows, before
	// the tree marker names the parent. An fsync per file, and a second copy of each
	// index, were most of the time a fresh runner spent writing the parent's files.
	write := func(sum string, data []byte) error {
		var first string
		for _, p := range bySum[sum] {
			dst := filepath.Join(o.TreeDir, filepath.FromSlash(p))
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				return err
			}
			if first != "" && atomicfile.Link(first, dst) == nil {
				continue
			}
			if err := atomicfile.WriteFileUnsynced(dst, data, 0o644); err != nil {
				return err
			}
			first = dst
		}
		return nil
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for _, sum := range sums {
		if _, ok := derived[sum]; ok {
			continue
		}
		g.Go(func() error {
			data, err := o.Fetch(gctx, sum)
			if err != nil {
				return fmt.Errorf("parent release %s: %s is neither in the tree nor readable from the store: %w", prev.ID, bySum[sum][0], err)
			}
			if int64(len(data)) != all[bySum[sum][0]].Size || sha256Hex(data) != sum {
				return fmt.Errorf("parent release %s: the store's object %s for %s has other contents", prev.ID, sum, bySum[sum][0])
			}
			mu.Lock()
			got[sum] = data
			mu.Unlock()
			return write(sum, data)
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	plains := map[string][]byte{}              // plain digest → bytes, for seeding
	members := map[string][]index.GzipMember{} // plain digest → its .gz's members
	for plain, gz := range derived {
		data, ms, err := index.Gunzip(got[gz], int(all[bySum[plain][0]].Size))
		if err == nil && sha256Hex(data) == plain {
			members[plain] = ms
		} else {
			// Not the same content after all: fetch it.
			if data, err = o.Fetch(ctx, plain); err != nil {
				return fmt.Errorf("parent release %s: %s is neither in the tree nor readable from the store: %w", prev.ID, bySum[plain][0], err)
			}
			if sha256Hex(data) != plain {
				return fmt.Errorf("parent release %s: the store's object %s for %s has other contents", prev.ID, plain, bySum[plain][0])
			}
		}
		if err := write(plain, data); err != nil {
			return err
		}
		plains[plain] = data
		var names []string
		for _, p := range bySum[plain] {
			if !strings.Contains(p, "/by-hash/") { // the build takes an index by its name
				names = append(names, p)
			}
		}
		for _, p := range names {
			made.add(p, data, len(names) > 1)
		}
	}
	if err := syncTree(filepath.Join(o.TreeDir, "dists")); err != nil {
		return fmt.Errorf("parent release %s: %w", prev.ID, err)
	}
	made.seeded(seedChunks(o, todo, all, plains, members, got))
	return nil
}

// seedChunks fills the index chunk cache from the fetched indexes: a fresh runner then
// compresses only the chunks its change touches, not the whole index again. Seeding is
// an optimisation, and its failures cost only time. It returns the cache, nil if it
// seeded nothing: the entries are written in the background, and the build takes them
// from that cache meanwhile.
func seedChunks(o *Options, fetched []manifest.File, all map[string]manifest.File, plains map[string][]byte, members map[string][]index.GzipMember, got map[string][]byte) *index.Cache {
	var icache *index.Cache
	for _, f := range fetched {
		if !strings.HasSuffix(f.Path, "/Packages") {
			continue
		}
		plain := plains[f.SHA256]
		if plain == nil {
			plain = got[f.SHA256]
		}
		gz, xz := got[all[f.Path+".gz"].SHA256], got[all[f.Path+".xz"].SHA256]
		if plain == nil || gz == nil || xz == nil {
			continue
		}
		if icache == nil {
			var err error
			if icache, err = index.OpenCache(filepath.Join(o.CacheDir, "chunks")); err != nil {
				return nil
			}
		}
		// Each form was checked against the SHA-256 the parent's manifest lists, as its
		// signed Release does: the parent vouches that its xz decompresses to its plain
		// index (apt checks that), so the xz blocks are not decoded. A plain index made
		// of gz comes with gz's members, which are not decoded again either.
		_, _ = icache.SeedPublished(f.Path, index.Published{Plain: plain, Gzip: gz, Xz: xz, GzipMembers: members[f.SHA256], Signed: true, Background: true})
	}
	return icache
}

// madeIndexes are the plain Packages indexes hydrate made, by path in the tree, until
// the build takes them. A nil *madeIndexes holds nothing and takes nothing.
type madeIndexes struct {
	mu     sync.Mutex
	files  map[string][]byte
	shared map[string]bool // the bytes are those of another path too
	// icache is the index cache hydrate seeded, whose entries may still be being
	// written (see index.Published.Background); nil if it seeded none.
	icache *index.Cache
}

// seeded notes the index cache hydrate seeded.
func (m *madeIndexes) seeded(c *index.Cache) {
	if m == nil {
		c.Wait()
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.icache = c
}

// indexCache returns the index cache hydrate seeded, or opens the cache in dir.
func (m *madeIndexes) indexCache(dir string) (*index.Cache, error) {
	if m == nil {
		return index.OpenCache(dir)
	}
	m.mu.Lock()
	c := m.icache
	m.mu.Unlock()
	if c != nil {
		return c, nil
	}
	return index.OpenCache(dir)
}

// wait waits for the writing of the entries hydrate seeded.
func (m *madeIndexes) wait() {
	if m == nil {
		return
	}
	m.mu.Lock()
	c := m.icache
	m.mu.Unlock()
	c.Wait()
}

// add holds data as the index at path; shared says that another path has the same bytes
// (two indexes of equal contents), which then must not be changed in place.
func (m *madeIndexes) add(path string, data []byte, shared bool) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.files == nil {
		m.files, m.shared = map[string][]byte{}, map[string]bool{}
	}
	m.files[path], m.shared[path] = data, shared
}

// take returns the index at path, which the tree holds too, and forgets it; nil if
// hydrate did not make it.
func (m *madeIndexes) take(path string) []byte {
	data, _ := m.takeShared(path)
	return data
}

// takeShared is take, and says whether another path was given the same bytes.
func (m *madeIndexes) takeShared(path string) (data []byte, shared bool) {
	if m == nil {
		return nil, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	data, shared = m.files[path], m.shared[path]
	delete(m.files, path)
	delete(m.shared, path)
	return data, shared
}

// fileHas reports whether the file at p has the digest sum.
func fileHas(p, sum string) bool {
	got, err := fileSHA256(p)
	return err == nil && got == sum
}

func readTreeMarker(o *Options) string {
	data, err := os.ReadFile(filepath.Join(o.CacheDir, treeMarker))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(data))
}

// writeTreeMarker records the release the tree holds. Losing it costs the next build a
// check of the tree's dists/ files against their digests.
func writeTreeMarker(o *Options, id string) {
	_ = atomicfile.WriteFileUnsynced(filepath.Join(o.CacheDir, treeMarker), []byte(id+"\n"), 0o644)
}
