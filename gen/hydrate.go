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
// The uncompressed Packages and Sources indexes the build takes stanzas from are made
// from their .gz, which the tree needs anyway, and handed to the build: prev does not
// publish them (see plain.go), or, made by an armor that did, lists them at four or five
// times the size of their .gz.
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
	// Published uncompressed indexes whose .gz is fetched too are made from it.
	derived := map[string]bool{} // digest
	for _, f := range todo {
		gz, ok := all[f.Path+".gz"]
		if isPlainIndex(f.Path) && ok && bySum[gz.SHA256] != nil {
			derived[f.SHA256] = true
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
		if derived[sum] {
			continue
		}
		g.Go(func() error {
			data, err := fetchFile(gctx, o, prev, all[bySum[sum][0]])
			if err != nil {
				return err
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
	// The Release files are in the tree now: they list the uncompressed indexes.
	plains := plainIndexes(o, prev)
	byGz := map[string][]string{} // digest of a fetched .gz → the uncompressed indexes it makes
	for _, ip := range slices.Sorted(maps.Keys(plains)) {
		if _, published := all[ip]; !isStanzaIndex(ip) && !published {
			continue // a Contents file: the build decompresses the tree's when it needs it
		}
		if gz, ok := all[ip+".gz"]; ok && got[gz.SHA256] != nil {
			byGz[gz.SHA256] = append(byGz[gz.SHA256], ip)
		}
	}
	var seeds []seed
	written := map[string]bool{} // published uncompressed indexes written
	for _, gzSum := range slices.Sorted(maps.Keys(byGz)) {
		ips := byGz[gzSum]
		d := plains[ips[0]]
		data, ms, err := index.Gunzip(got[gzSum], int(d.Size))
		if err == nil && (int64(len(data)) != d.Size || sha256Hex(data) != d.SHA256) {
			err = fmt.Errorf("its Release lists size %d and sha256 %s", d.Size, d.SHA256)
		}
		if err != nil {
			if f, ok := all[ips[0]]; ok && derived[f.SHA256] {
				// Published as well: fetch it, then.
				if data, err = fetchFile(ctx, o, prev, f); err != nil {
					return err
				}
				ms = nil
			} else {
				return fmt.Errorf("parent release %s: %s.gz does not decompress to the index %s: %w", prev.ID, ips[0], ips[0], err)
			}
		}
		for _, ip := range ips {
			if f, ok := all[ip]; ok && derived[f.SHA256] && !written[f.SHA256] {
				if err := write(f.SHA256, data); err != nil {
					return err
				}
				written[f.SHA256] = true
			}
			if isStanzaIndex(ip) {
				made.add(ip, data, len(ips) > 1)
				seeds = append(seeds, seed{ip, data, ms})
			}
		}
	}
	// A published one that no Release lists (it should) is fetched after all.
	for _, sum := range slices.Sorted(maps.Keys(derived)) {
		if written[sum] {
			continue
		}
		data, err := fetchFile(ctx, o, prev, all[bySum[sum][0]])
		if err == nil {
			err = write(sum, data)
		}
		if err != nil {
			return err
		}
	}
	if err := tree.Sync(filepath.Join(o.TreeDir, "dists")); err != nil {
		return fmt.Errorf("parent release %s: %w", prev.ID, err)
	}
	made.seeded(seedChunks(o, seeds, all, got))
	return nil
}

// fetchFile fetches the file f of prev from the store, and checks its size and digest.
func fetchFile(ctx context.Context, o *Options, prev *manifest.Manifest, f manifest.File) ([]byte, error) {
	data, err := o.Fetch(ctx, f.SHA256)
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
func seedChunks(o *Options, seeds []seed, all map[string]manifest.File, got map[string][]byte) *index.Cache {
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
			if icache, err = index.OpenCache(filepath.Join(o.CacheDir, "chunks")); err != nil {
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
