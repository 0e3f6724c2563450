package inputs

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"

	"github.com/bmatcuk/doublestar/v4"
	"golang.org/x/sync/errgroup"
	"golang.org/x/sys/unix"
)

// fileStat is what the build needs to know of an input without opening it.
type fileStat struct {
	size, mtimeNs int64
	regular, dir  bool
}

// File is a path an input pattern matched, with its stat.
type File struct {
	Path    string
	st      fileStat
	statted bool
}

// IsDir reports whether the file is a directory (a broad pattern matches those too).
func (f *File) IsDir() bool { return f.st.dir }

func statOf(st *unix.Stat_t) fileStat {
	return fileStat{st.Size, st.Mtim.Nano(), st.Mode&unix.S_IFMT == unix.S_IFREG, st.Mode&unix.S_IFMT == unix.S_IFDIR}
}

// Expand resolves glob patterns (with ** for any depth) relative to base into a
// list of distinct paths sorted by path, each with its stat, and returns the patterns
// that matched nothing (the caller decides whether that is an error).
//
// The common patterns ("*.deb", "**/*.deb") are walked by walkSimple, which stats each
// directory's matches relative to it, a large directory from two goroutines; others go
// through doublestar, and their matches are statted afterwards on all cores. For 100,000
// inputs the stats are most of an incremental build's look at its inputs.
//
// A directory is walked once per pattern however many symbolic links lead to it, so a
// link loop among the inputs ends; the walk stops when ctx is cancelled.
func Expand(ctx context.Context, base string, patterns []string) (files []File, unmatched []string, err error) {
	var out []File
	for _, pat := range patterns {
		before := len(out)
		full := pat
		if !filepath.IsAbs(full) {
			full = filepath.Join(base, pat)
		}
		root, rel := doublestar.SplitPattern(filepath.ToSlash(full))
		w := &dirWalk{ctx: ctx, seen: map[[2]uint64]bool{}}
		if seg, deep, ok := simplePattern(rel); ok {
			out, err = w.walkSimple(out, root, seg, deep)
		} else {
			err = doublestar.GlobWalk(walkFS{root, w}, rel, func(p string, d fs.DirEntry) error {
				out = append(out, File{Path: filepath.Join(root, filepath.FromSlash(p))})
				return nil
			})
		}
		if err != nil {
			return nil, nil, fmt.Errorf("input pattern %q: %w", pat, err)
		}
		if len(out) == before {
			unmatched = append(unmatched, pat)
		}
	}
	if len(patterns) > 1 || !slices.IsSortedFunc(out, func(a, b File) int { return strings.Compare(a.Path, b.Path) }) {
		out = Sorted(out) // one pattern lists each path once; compacting is a no-op then
	}
	if err := Stat(out); err != nil {
		return nil, nil, err
	}
	return out, unmatched, nil
}

// simplePattern recognises the patterns most configurations use, "*.deb" and
// "**/*.deb" (after the static directory doublestar.SplitPattern takes off): one last
// segment, at the top only or at any depth.
func simplePattern(rel string) (seg string, deep bool, ok bool) {
	seg, deep = strings.CutPrefix(rel, "**/")
	if seg == "" || strings.Contains(seg, "/") || strings.Contains(seg, "**") || !doublestar.ValidatePattern(seg) {
		return "", false, false
	}
	return seg, deep, true
}

// walkSimple appends what doublestar.GlobWalk(root, seg or "**/"+seg) would visit: every
// entry whose name matches seg, in root or, when deep, in any directory below it
// (following symbolic links to directories, as GlobWalk does). It reads each directory
// once, sorts only the names that match and stats nothing, where GlobWalk sorts every
// directory's entries and stats each match: that showed at 100,000 inputs.
func (w *dirWalk) walkSimple(out []File, root, seg string, deep bool) ([]File, error) {
	f, err := os.Open(root)
	if errors.Is(err, fs.ErrNotExist) {
		return out, nil // as GlobWalk: a pattern under a missing directory matches nothing
	}
	if err != nil {
		return nil, err
	}
	if first, err := w.enter(f); !first || err != nil {
		f.Close()
		return out, err
	}
	// The names to list, sorted (as strings: a slice of strings sorts faster than one of
	// structs), and which of them are directories.
	var names []string
	var dirs map[string]bool
	if deep {
		var des []fs.DirEntry
		if des, err = f.ReadDir(-1); err == nil {
			names = make([]string, len(des))
			dirs = map[string]bool{}
			for i, e := range des {
				names[i] = e.Name()
				isDir := e.IsDir()
				if e.Type()&fs.ModeSymlink != 0 {
					st, err := os.Stat(filepath.Join(root, e.Name()))
					isDir = err == nil && st.IsDir()
				}
				if isDir {
					dirs[e.Name()] = true
				}
			}
		}
	} else if names, err = f.Readdirnames(-1); err == nil {
		names = slices.DeleteFunc(names, func(n string) bool { return !matchName(seg, n) })
	}
	defer f.Close()
	if errors.Is(err, syscall.ENOTDIR) {
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	slices.Sort(names)
	if !strings.HasSuffix(root, "/") {
		root += "/"
	}
	dirfd := int(f.Fd())
	first := len(out)
	out = slices.Grow(out, len(names))
	var subdirs []string
	for _, name := range names {
		p := root + name
		if !deep || matchName(seg, name) {
			out = append(out, File{Path: p})
		}
		if dirs[name] {
			subdirs = append(subdirs, p)
		}
	}
	// Stat the matches relative to the open directory: resolving each whole path again
	// made the stats several times slower.
	if err := statAt(dirfd, len(root), out[first:]); err != nil {
		return nil, err
	}
	for _, d := range subdirs {
		if out, err = w.walkSimple(out, d, seg, deep); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// dirWalk is one pattern's walk of the inputs: the directories it has listed, by device
// and inode, and the build's context.
type dirWalk struct {
	ctx  context.Context
	seen map[[2]uint64]bool
}

// enter reports whether the open directory d is listed for the first time in this walk
// (not through a symbolic link to a directory listed already, as a link loop would
// have it); it fails once the build is cancelled.
func (w *dirWalk) enter(d *os.File) (bool, error) {
	if err := w.ctx.Err(); err != nil {
		return false, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(d.Fd()), &st); err != nil {
		return false, &fs.PathError{Op: "stat", Path: d.Name(), Err: err}
	}
	id := [2]uint64{uint64(st.Dev), st.Ino}
	if w.seen[id] {
		return false, nil
	}
	w.seen[id] = true
	return true, nil
}

// walkFS is the directory tree under root as doublestar.GlobWalk reads it, with dirWalk's
// rules: each directory listed once, and no listing once the build is cancelled.
type walkFS struct {
	root string
	w    *dirWalk
}

func (f walkFS) Open(name string) (fs.File, error) { return os.DirFS(f.root).Open(name) }

func (f walkFS) Stat(name string) (fs.FileInfo, error) { return fs.Stat(os.DirFS(f.root), name) }

func (f walkFS) ReadDir(name string) ([]fs.DirEntry, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: fs.ErrInvalid}
	}
	d, err := os.Open(filepath.Join(f.root, filepath.FromSlash(name)))
	if err != nil {
		return nil, err
	}
	defer d.Close()
	if first, err := f.w.enter(d); !first || err != nil {
		return nil, err
	}
	des, err := d.ReadDir(-1)
	slices.SortFunc(des, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return des, err
}

// statAt stats files, whose paths are a directory's prefix of length cut and a name in
// it, relative to the directory's descriptor; a large directory from two goroutines
// (below a few thousand files a goroutine is not worth starting; docs/benchmarks.md has
// the measurements).
func statAt(dirfd, cut int, files []File) error {
	if len(files) < 8192 {
		return statAtSerial(dirfd, cut, files)
	}
	half := len(files) / 2
	errc := make(chan error, 1)
	go func() { errc <- statAtSerial(dirfd, cut, files[half:]) }()
	err := statAtSerial(dirfd, cut, files[:half])
	if err2 := <-errc; err == nil {
		err = err2
	}
	return err
}

func statAtSerial(dirfd, cut int, files []File) error {
	var st unix.Stat_t
	for i := range files {
		f := &files[i]
		if err := unix.Fstatat(dirfd, f.Path[cut:], &st, 0); err != nil {
			return fmt.Errorf("read input: %w", &fs.PathError{Op: "stat", Path: f.Path, Err: err})
		}
		f.st, f.statted = statOf(&st), true
	}
	return nil
}

// matchName reports whether name matches the one-segment pattern seg, the common
// "*.deb" without doublestar's general matcher.
func matchName(seg, name string) bool {
	if suffix, ok := strings.CutPrefix(seg, "*"); ok && !strings.ContainsAny(suffix, `*?[{\`) {
		return strings.HasSuffix(name, suffix)
	}
	ok, _ := doublestar.Match(seg, name)
	return ok
}

// Stat fills in the stat of every file, following symbolic links, in parallel.
func Stat(files []File) error {
	const batch = 1024
	var g errgroup.Group
	g.SetLimit(runtime.GOMAXPROCS(0))
	for lo := 0; lo < len(files); lo += batch {
		part := files[lo:min(lo+batch, len(files))]
		g.Go(func() error {
			var st unix.Stat_t
			for i := range part {
				f := &part[i]
				if f.statted {
					continue
				}
				if err := unix.Stat(f.Path, &st); err != nil {
					return fmt.Errorf("read input: %w", &fs.PathError{Op: "stat", Path: f.Path, Err: err})
				}
				f.st, f.statted = statOf(&st), true
			}
			return nil
		})
	}
	return g.Wait()
}

// Sorted sorts files by path and drops repeated paths.
func Sorted(files []File) []File {
	slices.SortFunc(files, func(a, b File) int { return strings.Compare(a.Path, b.Path) })
	return slices.CompactFunc(files, func(a, b File) bool { return a.Path == b.Path })
}

// packageExts are the extensions of the files an input pattern is meant to match.
var packageExts = []string{".deb", ".udeb", ".ddeb", ".dsc"}

// PackageFiles drops what a broad pattern ("debs/**/*") matches that is not a package:
// directories, and the files beside a .dsc (the tarballs and patches it names, read
// through it). Other files, and a directory named like a package, stay, and are refused
// as not a package.
func PackageFiles(files []File) []File {
	dirs := map[string]bool{}
	drop := false
	for _, f := range files {
		if IsSource(f.Path) {
			dirs[filepath.Dir(f.Path)] = true
		}
		drop = drop || f.st.dir
	}
	if len(dirs) == 0 && !drop {
		return files
	}
	return slices.DeleteFunc(files, func(f File) bool {
		pkg := slices.ContainsFunc(packageExts, func(e string) bool { return strings.HasSuffix(f.Path, e) })
		return !pkg && (f.st.dir || dirs[filepath.Dir(f.Path)])
	})
}
