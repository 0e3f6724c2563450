package gen

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/armor-apt/armor/gen/deb"
	"github.com/bmatcuk/doublestar/v4"
	"golang.org/x/sync/errgroup"
)

// input is one .deb file named by the configuration, with what the build knows of it.
type input struct {
	Path    string
	Size    int64
	MtimeNs int64
	// Known from the stat cache or from reading the file.
	SHA256                              string
	Name, Version, Architecture, Source string
	// pkg is set when the file was read in this build; its stanza is fresh.
	pkg *deb.Package
}

// statCache remembers, per input path, the size and mtime the file had when it was last
// read and what was read from it, so a rebuild opens only new or changed files. It lives
// in the build cache directory, never in the manifest: mtimes differ between clones.
type statCache struct {
	Entries map[string]input
	// Kept lists tree paths of the previous release that this build no longer lists;
	// the next build deletes them, so a static mirror keeps one generation for clients
	// still holding the previous InRelease.
	Kept []string
}

const statCacheHeader = "armor build cache v1\n"

// loadStatCache reads the cache: a header line, then one tab-separated line per input
// (path, size, mtime, sha256, name, version, architecture, source) and one per kept path
// ("K", path). It is plain text rather than gob because it is read and written by every
// build: 100,000 entries take tens of milliseconds this way. A damaged cache only costs
// a full read of the inputs.
func loadStatCache(path string) *statCache {
	c := &statCache{Entries: map[string]input{}}
	data, err := os.ReadFile(path)
	if err != nil || !strings.HasPrefix(string(data), statCacheHeader) {
		return c
	}
	text := string(data[len(statCacheHeader):])
	entries := make(map[string]input, strings.Count(text, "\n"))
	for text != "" {
		line, rest, _ := strings.Cut(text, "\n")
		text = rest
		var fields [8]string
		f := splitTabs(line, fields[:0])
		switch {
		case len(f) == 2 && f[0] == "K":
			c.Kept = append(c.Kept, f[1])
		case len(f) == 8:
			size, err1 := strconv.ParseInt(f[1], 10, 64)
			mtime, err2 := strconv.ParseInt(f[2], 10, 64)
			if err1 != nil || err2 != nil {
				return &statCache{Entries: map[string]input{}}
			}
			entries[f[0]] = input{Path: f[0], Size: size, MtimeNs: mtime, SHA256: f[3],
				Name: f[4], Version: f[5], Architecture: f[6], Source: f[7]}
		default:
			return &statCache{Entries: map[string]input{}}
		}
	}
	c.Entries = entries
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

func (c *statCache) save(path string) error {
	paths := make([]string, 0, len(c.Entries))
	for p := range c.Entries {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	b := make([]byte, 0, len(paths)*200)
	b = append(b, statCacheHeader...)
	for _, p := range paths {
		in := c.Entries[p]
		if strings.ContainsAny(in.Path, "\t\n") {
			continue // such a path is simply read again next time
		}
		b = append(b, in.Path...)
		b = append(b, '\t')
		b = strconv.AppendInt(b, in.Size, 10)
		b = append(b, '\t')
		b = strconv.AppendInt(b, in.MtimeNs, 10)
		for _, f := range []string{in.SHA256, in.Name, in.Version, in.Architecture, in.Source} {
			b = append(b, '\t')
			b = append(b, f...) // validated control values hold no tabs or newlines
		}
		b = append(b, '\n')
	}
	for _, k := range c.Kept {
		if !strings.ContainsAny(k, "\t\n") {
			b = append(b, "K\t"...)
			b = append(b, k...)
			b = append(b, '\n')
		}
	}
	return WriteFileAtomic(path, b, 0o644)
}

// fileStat is what the build needs to know of an input without opening it.
type fileStat struct {
	size, mtimeNs int64
	regular       bool
}

// expandInputs resolves glob patterns (with ** for any depth) relative to base into a
// sorted list of distinct paths, and records each one's stat in stats: the directory
// walk already has it for regular files, so an incremental build of a large repository
// makes one system call per input rather than two. A pattern that matches nothing is not
// an error: an empty component is a valid, empty index.
func expandInputs(base string, patterns []string, stats map[string]fileStat) ([]string, error) {
	seen := map[string]bool{}
	var out []string
	for _, pat := range patterns {
		full := pat
		if !filepath.IsAbs(full) {
			full = filepath.Join(base, pat)
		}
		root, rel := doublestar.SplitPattern(filepath.ToSlash(full))
		err := doublestar.GlobWalk(os.DirFS(root), rel, func(p string, d fs.DirEntry) error {
			path := filepath.Join(root, filepath.FromSlash(p))
			if seen[path] {
				return nil
			}
			seen[path] = true
			out = append(out, path)
			var st fs.FileInfo
			var err error
			if d.Type().IsRegular() {
				st, err = d.Info()
			} else {
				st, err = os.Stat(path) // follows a symbolic link
			}
			if err != nil {
				return fmt.Errorf("read input: %w", err)
			}
			stats[path] = fileStat{st.Size(), st.ModTime().UnixNano(), st.Mode().IsRegular()}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("input pattern %q: %w", pat, err)
		}
	}
	sort.Strings(out)
	return out, nil
}

// readInputs stats every input and reads those the cache cannot vouch for, in parallel.
func readInputs(ctx context.Context, paths []string, stats map[string]fileStat, cache *statCache, verify bool, progress func(done, total int)) ([]*input, int, error) {
	ins := make([]*input, len(paths))
	var toRead []int
	for i, p := range paths {
		st := stats[p]
		if !st.regular {
			return nil, 0, fmt.Errorf("read input %s: not a regular file (a pattern in armor.toml matched it; make the pattern match only .deb files)", p)
		}
		in := &input{Path: p, Size: st.size, MtimeNs: st.mtimeNs}
		if c, ok := cache.Entries[p]; ok && !verify && c.Size == in.Size && c.MtimeNs == in.MtimeNs && c.SHA256 != "" {
			c.pkg = nil
			*in = c
		} else {
			toRead = append(toRead, i)
		}
		ins[i] = in
	}
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(runtime.GOMAXPROCS(0))
	var done atomic.Int64
	for _, i := range toRead {
		in := ins[i]
		g.Go(func() error {
			if err := ctx.Err(); err != nil {
				return err
			}
			pkg, err := deb.ReadFile(in.Path)
			if err != nil {
				return err
			}
			if pkg.Size != in.Size {
				return fmt.Errorf("%s: changed while being read", in.Path)
			}
			in.pkg = pkg
			in.SHA256 = pkg.SHA256
			in.Name, in.Version, in.Architecture, in.Source = pkg.Name, pkg.Version, pkg.Architecture, pkg.Source
			if progress != nil {
				progress(int(done.Add(1)), len(toRead))
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, 0, err
	}
	return ins, len(toRead), nil
}
