package inputs

import (
	"encoding/binary"
	"encoding/hex"
	"hash/crc32"
	"os"
	"strconv"
	"strings"
	"unsafe"
)

// StatCache remembers, per input path, the size and mtime the file had when it was last
// read and what was read from it, so a rebuild opens only new or changed files. It lives
// in the build cache directory, never in the manifest: mtimes differ between clones.
type StatCache struct {
	Entries []Input // sorted by path, each path once
	// Kept lists tree paths of the previous release that this build no longer lists;
	// the next build deletes them, so a static mirror keeps one generation for clients
	// still holding the previous InRelease.
	Kept []string
}

const (
	statCacheHeader  = "armor build cache v3\n"
	statCacheTrailer = "crc32c " // and the hex CRC-32C of everything before this line
)

// statCacheSum is the check of a stat cache file's contents: CRC-32C, which the CPU
// computes at memory speed, where a SHA-256 of the file cost every build a noticeable
// part of its time to read the file and as much to write it. It guards against a torn or
// damaged file, as the index cache's entries are; whoever can write the cache directory
// can change what it says anyway.
func statCacheSum(b []byte) uint32 { return crc32.Checksum(b, statCacheTable) }

var statCacheTable = crc32.MakeTable(crc32.Castagnoli)

// ParseStatCache reads the cache: a header line, one tab-separated line per input (path,
// size, mtime, sha256, name, version, architecture, source) in path order, one per kept
// path ("K", path), and a last line with the CRC-32C of the rest. It is plain text rather
// than gob because every build reads and writes it, and this way is the cheaper of the
// two (docs/benchmarks.md). The checksum lets the file be replaced without an fsync: a torn
// or damaged cache is ignored whole, which only costs a full read of the inputs. ok is
// false for such a file.
func ParseStatCache(data []byte) (c *StatCache, ok bool) {
	return parseStatCacheText(data, string(data))
}

// parseStatCacheText is parseStatCache on data and its text (the entries' strings point
// into text).
func parseStatCacheText(data []byte, text string) (c *StatCache, ok bool) {
	empty := &StatCache{}
	body, ok := strings.CutPrefix(text, statCacheHeader)
	i := strings.LastIndex(body, "\n"+statCacheTrailer)
	if !ok || i < 0 {
		return empty, false
	}
	sumLine := body[i+1+len(statCacheTrailer):]
	body = body[:i+1]
	sum := binary.BigEndian.AppendUint32(nil, statCacheSum(data[:len(statCacheHeader)+len(body)]))
	if sumLine != hex.EncodeToString(sum)+"\n" {
		return empty, false
	}
	c = &StatCache{Entries: make([]Input, 0, strings.Count(body, "\n"))}
	for body != "" {
		line, rest, _ := strings.Cut(body, "\n")
		body = rest
		var fields [8]string
		f := splitTabs(line, fields[:0])
		switch {
		case len(f) == 2 && f[0] == "K":
			c.Kept = append(c.Kept, f[1])
		case len(f) == 8:
			size, err1 := strconv.ParseInt(f[1], 10, 64)
			mtime, err2 := strconv.ParseInt(f[2], 10, 64)
			n := len(c.Entries)
			if err1 != nil || err2 != nil || f[0] == "" || n > 0 && c.Entries[n-1].Path >= f[0] {
				return empty, false
			}
			c.Entries = append(c.Entries, Input{Path: f[0], Size: size, MtimeNs: mtime, SHA256: f[3],
				Name: f[4], Version: f[5], Architecture: f[6], Source: f[7]})
		default:
			return empty, false
		}
	}
	return c, true
}

// LoadStatCache reads the stat cache at path; a missing or damaged one is empty.
func LoadStatCache(path string) *StatCache {
	data, err := os.ReadFile(path)
	if err != nil || len(data) == 0 {
		return &StatCache{}
	}
	// data is not written after this: the entries' strings can share its memory instead
	// of a copy of 17 MB at 100,000 inputs.
	c, _ := parseStatCacheText(data, unsafe.String(unsafe.SliceData(data), len(data)))
	return c
}

// splitTabs appends the tab-separated fields of line to f (at most 9, so a line with
// too many fields is still told apart) without allocating.
func splitTabs(line string, f []string) []string {
	for len(f) < 9 {
		i := strings.IndexByte(line, '\t')
		if i < 0 {
			return append(f, line)
		}
		f = append(f, line[:i])
		line = line[i+1:]
	}
	return f
}

// Encode returns the cache file's bytes. Entries must be sorted by path.
func (c *StatCache) Encode() []byte {
	entries := make([]*Input, len(c.Entries))
	for i := range c.Entries {
		entries[i] = &c.Entries[i]
	}
	return EncodeStatCache(entries, c.Kept)
}

// EncodeStatCache returns the bytes of a cache of entries, sorted by path, and the kept
// paths.
func EncodeStatCache(entries []*Input, kept []string) []byte {
	b := make([]byte, 0, len(entries)*200+len(statCacheHeader)+100)
	b = append(b, statCacheHeader...)
	for _, in := range entries {
		if in.Path == "" || strings.ContainsAny(in.Path, "\t\n") {
			continue // such a path is simply read again next time
		}
		b = append(b, in.Path...)
		b = append(b, '\t')
		b = strconv.AppendInt(b, in.Size, 10)
		b = append(b, '\t')
		b = strconv.AppendInt(b, in.MtimeNs, 10)
		for _, f := range [...]string{in.SHA256, in.Name, in.Version, in.Architecture, in.Source} {
			b = append(b, '\t')
			b = append(b, f...) // validated control values hold no tabs or newlines
		}
		b = append(b, '\n')
	}
	for _, k := range kept {
		if !strings.ContainsAny(k, "\t\n") {
			b = append(b, "K\t"...)
			b = append(b, k...)
			b = append(b, '\n')
		}
	}
	return appendStatCacheSum(b)
}

// appendStatCacheSum appends the checksum line of the cache file b.
func appendStatCacheSum(b []byte) []byte {
	sum := binary.BigEndian.AppendUint32(nil, statCacheSum(b))
	b = append(b, statCacheTrailer...)
	b = hex.AppendEncode(b, sum)
	return append(b, '\n')
}
