package index

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/armor-apt/armor/internal/atomicfile"
)

// Cache stores compressed chunks on disk, one file per chunk and format, named by the
// SHA-256 of the chunk's plain bytes (the xz form, which refers back into the chunk
// before it, by xzKey of both chunks' sums), and one digest state per index name (the hash states
// at the chunk boundaries of its last build), named by the SHA-256 of the name. It is safe
// for concurrent use by several Builds; two Builds of one name at once leave the state of
// either.
//
// Writes are atomic (temp file, then rename) but not fsynced: every entry ends with a
// CRC-32C of its name and contents, and an entry that is short, torn or altered is
// recomputed and rewritten, never used. A crash therefore costs at most some recompression
// and rehashing.
//
// Prune bounds the cache: it drops entries neither used in this session nor in the last
// two weeks. Digest states are entries like the others, listed in Files.Entries: a Build
// uses its own, so Prune keeps it. An index reused unchanged is not built, so name its
// entries with Keep; a digest state lost all the same costs one full hashing of its index.
type Cache struct {
	dir string

	mu   sync.Mutex
	used map[string]struct{}  // entry names read or written since OpenCache
	held map[string]heldEntry // entries seeded in the background, in memory until written
	bg   sync.WaitGroup       // the background writing of held entries

	hits, misses, corrupt, digested, scanned atomic.Int64
}

// CacheStats counts cache lookups since OpenCache.
type CacheStats struct {
	Hits    int64 // entries found intact and used
	Misses  int64 // chunks compressed because no intact entry was found
	Corrupt int64 // entries found but rejected (and rewritten), digest state files included
	// Digested counts the bytes hashed for Files.Digests, each byte once for its three sums.
	// A build that finds the digest state of its previous build hashes only the bytes from
	// the first changed chunk on (and the small xz index and footer).
	Digested int64
	// Scanned counts the plain bytes cut into chunks and hashed: every byte of an index,
	// but for the unchanged chunks a Base lets a build take from its digest state.
	Scanned int64
}

// Entry kinds. The suffix names the format and its parameters; change it whenever the bytes
// a format produces for the same plain input change, so that old entries are not reused.
const (
	kindGzip = "gz9.1"               // one gzip member, level 9, deterministic header
	kindXZ   = "lz2prev.1"           // LZMA2 chunks primed by the previous chunk (compressLZMA2Chunks), lc=4 pb=0
	tmpPre   = atomicfile.TempPrefix // prefix of entries being written
)

// Each entry is the payload, then a trailer: aux (uint64 LE, meaning per kind), CRC-32C of
// the entry's name, payload and aux (uint32 LE), and entryMagic. The name is in the check so
// that an intact entry stored under another chunk's name is rejected too.
const trailerSize = 16

var entryMagic = []byte("AIX1")

// OpenCache opens the cache in dir, creating dir if it does not exist.
func OpenCache(dir string) (*Cache, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("open index cache: %w", err)
	}
	return &Cache{dir: dir, used: make(map[string]struct{})}, nil
}

// Stats returns the lookup counts since OpenCache.
func (c *Cache) Stats() CacheStats {
	return CacheStats{Hits: c.hits.Load(), Misses: c.misses.Load(), Corrupt: c.corrupt.Load(),
		Digested: c.digested.Load(), Scanned: c.scanned.Load()}
}

func entryName(sum [32]byte, kind string) string {
	return fmt.Sprintf("%x.%s", sum, kind)
}

func (c *Cache) markUsed(name string) {
	c.mu.Lock()
	c.used[name] = struct{}{}
	c.mu.Unlock()
}

// size returns the payload length of the entry called name, if the entry exists and is
// long enough to hold a trailer. Its contents are checked when it is read.
func (c *Cache) size(name string) (payload int, ok bool) {
	if e, ok := c.heldEntry(name); ok {
		return len(e.payload), true
	}
	info, err := os.Stat(filepath.Join(c.dir, name))
	if err != nil || !info.Mode().IsRegular() || info.Size() < trailerSize {
		return 0, false
	}
	c.touch(name, info.ModTime())
	return int(info.Size()) - trailerSize, true
}

// meta is what an intact entry's trailer records.
type meta struct {
	aux uint64 // meaning per kind
	crc uint32 // CRC-32C of the entry's name, payload and aux
}

// readInto reads the payload of the entry called name into dst, which must be exactly as
// long as the payload, and returns what its trailer records. ok is false when the entry is
// missing, has changed length since size, or fails its check; then dst holds garbage. Only
// an unexpected read error is returned as an error.
func (c *Cache) readInto(name string, dst []byte) (m meta, ok bool, err error) {
	if e, held := c.heldEntry(name); held && len(e.payload) == len(dst) {
		copy(dst, e.payload)
		c.markUsed(name)
		return e.meta, true, nil
	}
	f, err := os.Open(filepath.Join(c.dir, name))
	if errors.Is(err, fs.ErrNotExist) {
		return meta{}, false, nil
	}
	if err != nil {
		return meta{}, false, fmt.Errorf("read index cache entry %s: %w", name, err)
	}
	defer f.Close()
	var trailer [trailerSize + 1]byte // one more byte to see that the entry ends there
	if _, err := io.ReadFull(f, dst); err != nil {
		return meta{}, false, c.reject(err)
	}
	n, err := io.ReadFull(f, trailer[:])
	if n != trailerSize || err != io.ErrUnexpectedEOF {
		return meta{}, false, c.reject(err)
	}
	aux, ok := checkTrailer(name, dst, trailer[:trailerSize])
	if !ok {
		return meta{}, false, c.reject(nil)
	}
	c.markUsed(name)
	return meta{aux: aux, crc: binary.LittleEndian.Uint32(trailer[8:])}, true, nil
}

// reject counts an entry that cannot be used; a read error other than a short file is
// returned.
func (c *Cache) reject(err error) error {
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("read index cache entry: %w", err)
	}
	c.corrupt.Add(1)
	return nil
}

// checkTrailer checks the trailer of the entry called name against its payload and returns
// the aux value it holds.
func checkTrailer(name string, payload, trailer []byte) (aux uint64, ok bool) {
	if len(trailer) != trailerSize || !bytes.Equal(trailer[12:], entryMagic) {
		return 0, false
	}
	crc := crc32.Update(entryCRC(name, payload), castagnoli, trailer[:8])
	if crc != binary.LittleEndian.Uint32(trailer[8:]) {
		return 0, false
	}
	return binary.LittleEndian.Uint64(trailer), true
}

// encodeEntry returns the entry called name: payload followed by its trailer.
func encodeEntry(name string, payload []byte, aux uint64) []byte {
	return append(append([]byte(nil), payload...), entryTrailer(name, payload, aux)...)
}

// entryTrailer returns the trailer of an entry of payload and aux.
func entryTrailer(name string, payload []byte, aux uint64) []byte {
	t := binary.LittleEndian.AppendUint64(make([]byte, 0, trailerSize), aux)
	crc := crc32.Update(entryCRC(name, payload), castagnoli, t)
	t = binary.LittleEndian.AppendUint32(t, crc)
	return append(t, entryMagic...)
}

// entryCRC is the check of an entry: CRC-32C of its name, then of its payload and aux.
func entryCRC(name string, payloadAux []byte) uint32 {
	return crc32.Update(crc32.Checksum([]byte(name), castagnoli), castagnoli, payloadAux)
}

// put stores an entry atomically and returns the CRC its trailer records.
func (c *Cache) put(name string, payload []byte, aux uint64) (crc uint32, err error) {
	// The payload is written as it is, not copied beside its trailer: a fresh runner
	// seeds every chunk of the parent's indexes, tens of megabytes at 100,000 packages.
	trailer := entryTrailer(name, payload, aux)
	crc = binary.LittleEndian.Uint32(trailer[8:])
	err = atomicfile.Write(filepath.Join(c.dir, name), 0o644, false, func(w io.Writer) error {
		if _, err := w.Write(payload); err != nil {
			return err
		}
		_, err := w.Write(trailer)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("write index cache entry %s: %w", name, err)
	}
	c.markUsed(name)
	return crc, nil
}

// heldEntry is an entry a background seeding holds in memory until it is written: its
// payload (a slice of a published file, checked by the seeding) and what its trailer
// records.
type heldEntry struct {
	payload []byte
	meta
}

// heldEntry returns the entry called name if it is held in memory.
func (c *Cache) heldEntry(name string) (heldEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.held[name]
	return e, ok
}

// hold keeps the entries in memory, where size and readInto find them at once, and writes
// them to disk on one goroutine in the background, dropping each from memory once it is
// written; Wait waits for that. A failed write is dropped too: the entry is then
// compressed again by the Build after the next, which costs only time, as for any entry
// the cache lacks. Writing is serial because the file system serialises the creation of
// entries in one directory anyway, and it leaves the other core to the build.
func (c *Cache) hold(names []string, entries []heldEntry) {
	c.mu.Lock()
	if c.held == nil {
		c.held = make(map[string]heldEntry, len(names))
	}
	for i, name := range names {
		c.held[name] = entries[i]
	}
	c.mu.Unlock()
	c.bg.Add(1)
	go func() {
		defer c.bg.Done()
		for i, name := range names {
			_, _ = c.put(name, entries[i].payload, entries[i].aux)
			c.mu.Lock()
			delete(c.held, name)
			c.mu.Unlock()
		}
	}()
}

// Wait waits until every entry seeded in the background (SeedPublished with
// Published.Background) is written to disk, or failed to be.
func (c *Cache) Wait() {
	if c != nil {
		c.bg.Wait()
	}
}

// Retention. Prune deletes an entry only when no Build used it since OpenCache and it has
// not been used for keepFor either: the orchestrator reuses an unchanged index without
// building it, and the chunks of such an index must survive for when it changes again.
// Using an entry refreshes its mtime, at most once per touchAfter so that a warm build
// costs no writes. Temp files older than staleTemp are leftovers of crashed writers.
const (
	keepFor    = 14 * 24 * time.Hour
	touchAfter = 24 * time.Hour
	staleTemp  = time.Hour
)

// touch refreshes the mtime of an entry last touched before touchAfter. Failing to is
// harmless: the entry may then be pruned early and recompressed when next needed.
func (c *Cache) touch(name string, mtime time.Time) {
	if now := time.Now(); now.Sub(mtime) > touchAfter {
		_ = os.Chtimes(filepath.Join(c.dir, name), now, now)
	}
}

// Keep marks the entries of an index that is reused without being built (Files.Entries of
// the build that made it) as used, so that Prune keeps them. Missing entries are ignored.
func (c *Cache) Keep(entries []string) {
	for _, name := range entries {
		if strings.ContainsAny(name, `/\`) {
			continue
		}
		info, err := os.Stat(filepath.Join(c.dir, name))
		if err != nil {
			continue
		}
		c.touch(name, info.ModTime())
		c.markUsed(name)
	}
}

// Prune deletes the entries that no Build used (or Keep named) since OpenCache and that
// were not used in the last 14 days either. That bounds the cache by the indexes it serves
// plus two weeks of superseded chunks, while the chunks of indexes left unchanged by recent
// builds stay. Call it after a successful build.
func (c *Cache) Prune() error {
	ents, err := os.ReadDir(c.dir)
	if err != nil {
		return fmt.Errorf("prune index cache: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	for _, e := range ents {
		name := e.Name()
		if _, ok := c.used[name]; ok || e.IsDir() {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue // already gone
		}
		age, keep := time.Since(info.ModTime()), keepFor
		if strings.HasPrefix(name, tmpPre) {
			keep = staleTemp // a temp file younger than this may be a write in progress
		}
		if age < keep {
			continue
		}
		if err := os.Remove(filepath.Join(c.dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("prune index cache: %w", err)
	}
	return nil
}
