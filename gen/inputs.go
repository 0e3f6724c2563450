package gen

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
	"sync/atomic"
	"syscall"

	"github.com/armor-apt/armor/debian/deb"
	"github.com/bmatcuk/doublestar/v4"
	"golang.org/x/sync/errgroup"
	"golang.org/x/sys/unix"
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
	// src is set instead for a source package (.dsc) read in this build.
	src *deb.Source
}

// fresh reports whether the input was read in this build.
func (in *input) fresh() bool { return in.pkg != nil || in.src != nil }

// isSource reports whether a path names a source package's .dsc.
func isSource(path string) bool { return strings.HasSuffix(path, ".dsc") }

// readSource reads a .dsc input and what the build needs of it.
func (in *input) readSource() error {
	s, err := deb.ReadDscFile(in.Path)
	if err != nil {
		return err
	}
	if s.Size != in.Size {
		return fmt.Errorf("%s: changed while being read", in.Path)
	}
	in.src = s
	in.SHA256 = s.SHA256
	in.Name, in.Version, in.Architecture, in.Source = s.Name, s.Version, "source", s.Name
	return nil
}

// fileStat is what the build needs to know of an input without opening it.
type fileStat struct {
	size, mtimeNs int64
	regular, dir  bool
}

// inputFile is a path an input pattern matched, with its stat.
type inputFile struct {
	path    string
	st      fileStat
	statted bool
}

func statOf(st *unix.Stat_t) fileStat {
	return fileStat{st.Size, st.Mtim.Nano(), st.Mode&unix.S_IFMT == unix.S_IFREG, st.Mode&unix.S_IFMT == unix.S_IFDIR}
}

// expandInputs resolves glob patterns (with ** for any depth) relative to base into a
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
func expandInputs(ctx context.Context, base string, patterns []string) (files []inputFile, unmatched []string, err error) {
	var out []inputFile
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
				out = append(out, inputFile{path: filepath.Join(root, filepath.FromSlash(p))})
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
	if len(patterns) > 1 || !slices.IsSortedFunc(out, func(a, b inputFile) int { return strings.Compare(a.path, b.path) }) {
		out = sortedInputs(out) // one pattern lists each path once; compacting is a no-op then
	}
	if err := statInputs(out); err != nil {
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
func (w *dirWalk) walkSimple(out []inputFile, root, seg string, deep bool) ([]inputFile, error) {
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
	// The names to list, sorted (a slice of strings sorts faster than one of structs:
	// 100,000 names took 25 ms against 40), and which of them are directories.
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
			out = append(out, inputFile{path: p})
		}
		if dirs[name] {
			subdirs = append(subdirs, p)
		}
	}
	// Stat the matches relative to the open directory: resolving each whole path again
	// made the stats five times slower.
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
// it, relative to the directory's descriptor; a large directory from two goroutines (at
// 100,000 inputs that took the stats from about 135 to 100 ms here; below a few thousand
// a goroutine is not worth starting).
func statAt(dirfd, cut int, files []inputFile) error {
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

func statAtSerial(dirfd, cut int, files []inputFile) error {
	var st unix.Stat_t
	for i := range files {
		f := &files[i]
		if err := unix.Fstatat(dirfd, f.path[cut:], &st, 0); err != nil {
			return fmt.Errorf("read input: %w", &fs.PathError{Op: "stat", Path: f.path, Err: err})
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

// statInputs fills in the stat of every file, following symbolic links, in parallel.
func statInputs(files []inputFile) error {
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
				if err := unix.Stat(f.path, &st); err != nil {
					return fmt.Errorf("read input: %w", &fs.PathError{Op: "stat", Path: f.path, Err: err})
				}
				f.st, f.statted = statOf(&st), true
			}
			return nil
		})
	}
	return g.Wait()
}

// readInputs stats every input and reads those the cache cannot vouch for, in parallel.
func readInputs(ctx context.Context, files []inputFile, cache *statCache, verify bool, progress func(done, total int)) ([]*input, int, error) {
	ins := make([]*input, len(files))
	slab := make([]input, len(files))
	var toRead []int
	cached, k := cache.Entries, 0
	for i, f := range files {
		p, st := f.path, f.st
		if !st.regular {
			return nil, 0, fmt.Errorf("read input %s: not a regular file (a pattern in armor.toml matched it; make the pattern match only .deb, .udeb, .ddeb or .dsc files)", p)
		}
		in := &slab[i]
		*in = input{Path: p, Size: st.size, MtimeNs: st.mtimeNs}
		for k < len(cached) && cached[k].Path < p {
			k++ // files and the cache are both sorted by path
		}
		if k < len(cached) && cached[k].Path == p && !verify &&
			cached[k].Size == in.Size && cached[k].MtimeNs == in.MtimeNs && cached[k].SHA256 != "" {
			*in = cached[k]
			in.pkg, in.src = nil, nil
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
			if isSource(in.Path) {
				if err := in.readSource(); err != nil {
					return err
				}
				if progress != nil {
					progress(int(done.Add(1)), len(toRead))
				}
				return nil
			}
			pkg, err := deb.ReadFile(in.Path)
			if err != nil {
				return err
			}
			if t, _ := pkg.Value("Package-Type"); t == "udeb" && packageExt(in.Path) != ".udeb" {
				return fmt.Errorf("%s: field Package-Type: an installer package (udeb) must be named .udeb, so that it is listed only in the debian-installer index: rename the file", in.Path)
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
