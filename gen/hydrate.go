package gen

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/armor-apt/armor/debian/release"
	"github.com/armor-apt/armor/gen/index"
	"github.com/armor-apt/armor/gen/tree"
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

// hydrate makes the tree hold prev's dists/ files (but those of the suite-name alias
// directories aliases: links to their codenames'), fetched by fetch. Without fetch it leaves the
// tree as it is: the build then reads what it needs from its inputs, as it always did.
// The plain Packages indexes it writes it also hands to the build, which reads them next:
// read back from the tree, they would be a second copy of the largest files of the
// release in memory.
func hydrate(ctx context.Context, d dirs, fetch fetchFunc, aliases []string, prev *manifest.Manifest, made *madeIndexes) error {
	if prev == nil {
		return nil
	}
	trusted := readTreeMarker(d.cache) == prev.ID
	var todo []manifest.File
	for _, f := range prev.Files {
		if !strings.HasPrefix(f.Path, "dists/") || isAlias(aliases, f.Path) {
			continue // a suite name's files are its codename's, through a link
		}
		if inTree(d.tree, f) && (trusted || fileHas(filepath.Join(d.tree, filepath.FromSlash(f.Path)), f.SHA256)) {
			continue
		}
		todo = append(todo, f)
	}
	if len(todo) == 0 {
		if !trusted {
			writeTreeMarker(d.cache, prev.ID)
		}
		return nil
	}
	if fetch == nil {
		return nil
	}
	if err := fetchFiles(ctx, d, fetch, aliases, prev, todo, made); err != nil {
		return err
	}
	writeTreeMarker(d.cache, prev.ID)
	return nil
}

// fetchFiles writes files of prev into the tree from the store, each object fetched once.
// The uncompressed Packages and Sources indexes the build takes stanzas from are made
// from their .gz, which the tree needs anyway, and handed to the build: prev does not
// publish them (see plain.go), or, made by an armor that did, lists them at four or five
// times the size of their .gz.
func fetchFiles(ctx context.Context, d dirs, fetch fetchFunc, aliases []string, prev *manifest.Manifest, todo []manifest.File, made *madeIndexes) error {
	h := newHydration(d.tree, fetch, prev, todo)
	if err := h.fetchObjects(ctx); err != nil {
		return err
	}
	// The Release files are in the tree now: they list the uncompressed indexes.
	seeds, err := h.derivePlains(ctx, plainIndexes(d.tree, aliases, prev), made)
	if err != nil {
		return err
	}
	// A published one that no Release lists (it should) is fetched after all.
	for _, sum := range slices.Sorted(maps.Keys(h.derived)) {
		if h.written[sum] {
			continue
		}
		data, err := fetchFile(ctx, fetch, prev, h.all[h.bySum[sum][0]])
		if err == nil {
			err = h.write(sum, data)
		}
		if err != nil {
			return err
		}
	}
	if err := tree.Sync(filepath.Join(d.tree, "dists")); err != nil {
		return fmt.Errorf("parent release %s: %w", prev.ID, err)
	}
	made.seeded(seedChunks(d.cache, seeds, h.all, h.got))
	return nil
}

// hydration is one run of fetchFiles.
type hydration struct {
	tree    string
	fetch   fetchFunc
	prev    *manifest.Manifest
	all     map[string]manifest.File // prev's files by path
	bySum   map[string][]string      // digest → the tree paths to write
	sums    []string                 // the digests of bySum, in the order of the files
	derived map[string]bool          // digests of published uncompressed indexes made from their .gz
	written map[string]bool          // of derived, those written

	mu  sync.Mutex
	got map[string][]byte // what was fetched, by digest
}

func newHydration(tree string, fetch fetchFunc, prev *manifest.Manifest, todo []manifest.File) *hydration {
	h := &hydration{tree: tree, fetch: fetch, prev: prev, all: map[string]manifest.File{}, bySum: map[string][]string{},
		derived: map[string]bool{}, written: map[string]bool{}, got: map[string][]byte{}}
	for _, f := range todo {
		if h.bySum[f.SHA256] == nil {
			h.sums = append(h.sums, f.SHA256)
		}
		h.bySum[f.SHA256] = append(h.bySum[f.SHA256], f.Path)
	}
	for _, f := range prev.Files {
		h.all[f.Path] = f
	}
	// Published uncompressed indexes whose .gz is fetched too are made from it.
	for _, f := range todo {
		gz, ok := h.all[f.Path+".gz"]
		if isPlainIndex(f.Path) && ok && h.bySum[gz.SHA256] != nil {
			h.derived[f.SHA256] = true
		}
	}
	return h
}

// write writes data at every path of the digest sum. Each content is written once,
// unsynced, and its other paths (its by-hash copy) are links to it, as the build makes
// them; one flush of the file system follows, before the tree marker names the parent. An
// fsync per file, and a second copy of each index, were most of the time a fresh runner
// spent writing the parent's files.
func (h *hydration) write(sum string, data []byte) error {
	var first string
	for _, p := range h.bySum[sum] {
		dst := filepath.Join(h.tree, filepath.FromSlash(p))
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

// fetchObjects fetches and writes every object but the derived ones, several at once.
func (h *hydration) fetchObjects(ctx context.Context) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for _, sum := range h.sums {
		if h.derived[sum] {
			continue
		}
		g.Go(func() error {
			data, err := fetchFile(gctx, h.fetch, h.prev, h.all[h.bySum[sum][0]])
			if err != nil {
				return err
			}
			h.mu.Lock()
			h.got[sum] = data
			h.mu.Unlock()
			return h.write(sum, data)
		})
	}
	return g.Wait()
}

// derivePlains makes the uncompressed indexes of plains (by path in the tree, as the
// parent's Release files list them) from their fetched .gz, writes those the parent
// publishes, and hands the Packages and Sources indexes to the build (made). It returns
// them with their .gz's members, to seed the index cache with.
func (h *hydration) derivePlains(ctx context.Context, plains map[string]release.Digests, made *madeIndexes) ([]seed, error) {
	byGz := map[string][]string{} // digest of a fetched .gz → the uncompressed indexes it makes
	for _, ip := range slices.Sorted(maps.Keys(plains)) {
		if _, published := h.all[ip]; !isStanzaIndex(ip) && !published {
			continue // a Contents file: the build decompresses the tree's when it needs it
		}
		if gz, ok := h.all[ip+".gz"]; ok && h.got[gz.SHA256] != nil {
			byGz[gz.SHA256] = append(byGz[gz.SHA256], ip)
		}
	}
	var seeds []seed
	for _, gzSum := range slices.Sorted(maps.Keys(byGz)) {
		ips := byGz[gzSum]
		d := plains[ips[0]]
		data, ms, err := index.Gunzip(h.got[gzSum], int(d.Size))
		if err == nil && (int64(len(data)) != d.Size || sha256Hex(data) != d.SHA256) {
			err = fmt.Errorf("its Release lists size %d and sha256 %s", d.Size, d.SHA256)
		}
		if err != nil {
			f, ok := h.all[ips[0]]
			if !ok || !h.derived[f.SHA256] {
				return nil, fmt.Errorf("parent release %s: %s.gz does not decompress to the index %s: %w", h.prev.ID, ips[0], ips[0], err)
			}
			// Published as well: fetch it, then.
			if data, err = fetchFile(ctx, h.fetch, h.prev, f); err != nil {
				return nil, err
			}
			ms = nil
		}
		for _, ip := range ips {
			if f, ok := h.all[ip]; ok && h.derived[f.SHA256] && !h.written[f.SHA256] {
				if err := h.write(f.SHA256, data); err != nil {
					return nil, err
				}
				h.written[f.SHA256] = true
			}
			if isStanzaIndex(ip) {
				made.add(ip, data, len(ips) > 1)
				seeds = append(seeds, seed{ip, data, ms})
			}
		}
	}
	return seeds, nil
}

// fetchFile fetches the file f of prev from the store, and checks its size and digest.
func fetchFile(ctx context.Context, fetch fetchFunc, prev *manifest.Manifest, f manifest.File) ([]byte, error) {
	data, err := fetch(ctx, f.SHA256, f.Size)
	if err != nil {
		return nil, fmt.Errorf("parent release %s: %s is neither in the tree nor readable from the store: %w", prev.ID, f.Path, err)
	}
	if int64(len(data)) != f.Size || sha256Hex(data) != f.SHA256 {
		return nil, fmt.Errorf("parent release %s: the store's object %s for %s has other contents", prev.ID, f.SHA256, f.Path)
	}
	return data, nil
}

// seed is an uncompressed index hydrate made from its .gz, and the .gz's members.
type seed struct {
	path    string
	plain   []byte
	members []index.GzipMember
}

// seedChunks fills the index chunk cache from the fetched indexes: a fresh runner then
// compresses only the chunks its change touches, not the whole index again. Seeding is
// an optimisation, and its failures cost only time. It returns the cache, nil if it
// seeded nothing: the entries are written in the background, and the build takes them
// from that cache meanwhile.
func seedChunks(cacheDir string, seeds []seed, all map[string]manifest.File, got map[string][]byte) *index.Cache {
	var icache *index.Cache
	for _, sd := range seeds {
		if path.Base(sd.path) != "Packages" {
			continue
		}
		gz, xz := got[all[sd.path+".gz"].SHA256], got[all[sd.path+".xz"].SHA256]
		if gz == nil || xz == nil {
			continue
		}
		if icache == nil {
			var err error
			if icache, err = index.OpenCache(filepath.Join(cacheDir, "chunks")); err != nil {
				return nil
			}
		}
		// Each form was checked against the SHA-256 the parent's manifest or Release
		// lists, as its signed Release does: the parent vouches that its xz decompresses
		// to its plain index (apt checks that), so the xz blocks are not decoded. A plain
		// index made of gz comes with gz's members, which are not decoded again either.
		_, _ = icache.SeedPublished(sd.path, index.Published{Plain: sd.plain, Gzip: gz, Xz: xz, GzipMembers: sd.members, Signed: true, Background: true})
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

func readTreeMarker(cacheDir string) string {
	data, err := os.ReadFile(filepath.Join(cacheDir, treeMarker))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(data))
}

// hasTreeMarker reports whether the cache has a tree marker: whether a build or hydrate
// ever wrote the tree with this cache.
func hasTreeMarker(cacheDir string) bool {
	_, err := os.Stat(filepath.Join(cacheDir, treeMarker))
	return err == nil
}

// writeTreeMarker records the release the tree holds. Losing it costs the next build a
// check of the tree's dists/ files against their digests.
func writeTreeMarker(cacheDir, id string) {
	_ = atomicfile.WriteFileUnsynced(filepath.Join(cacheDir, treeMarker), []byte(id+"\n"), 0o644)
}
