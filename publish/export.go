package publish

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/armor-apt/armor/internal/atomicfile"
	"github.com/armor-apt/armor/manifest"
	"github.com/armor-apt/armor/store"
	"golang.org/x/sync/errgroup"
)

// ExportOptions say which release Export writes, where, and how.
type ExportOptions struct {
	Store    store.Store
	Manifest *manifest.Manifest
	Dir      string
	Jobs     int // paths written at once; default 8
	// Verify re-hashes every file already in Dir with the listed size before keeping it.
	// Without it, a pool/ or by-hash/ file of the listed size is kept as it is (as rsync
	// keeps a file on its quick check); the other files of dists/ (indexes, Release,
	// InRelease), whose names are reused by every release, are always re-hashed.
	Verify bool
	// Delete removes the files under Dir/dists and Dir/pool that the release does not
	// list, and the directories that leaves empty, once everything else is written.
	Delete bool
	// Progress, if set, is called as bytes are written, from any goroutine.
	Progress func(ExportProgress)
}

// ExportProgress counts what Export has written of what it has to write.
type ExportProgress struct {
	PathsDone, PathsTotal int
	BytesDone, BytesTotal int64
}

// ExportReport is what Export did.
type ExportReport struct {
	Release      string   `json:"release"`
	Store        string   `json:"store"`
	Dir          string   `json:"dir"`
	Paths        int      `json:"paths"`         // paths the release lists
	Objects      int      `json:"objects"`       // distinct objects among them
	Fetched      int      `json:"fetched"`       // objects read from the store
	BytesFetched int64    `json:"bytes_fetched"` // their bytes
	Linked       int      `json:"linked"`        // paths written from a file of Dir holding the same object (hard link, else copy)
	Kept         int      `json:"kept"`          // paths already in Dir with the listed content, left as they were
	BytesKept    int64    `json:"bytes_kept"`
	Verified     bool     `json:"verified"` // every kept file was re-hashed (Verify)
	Deleted      []string `json:"deleted"`  // paths Delete removed, sorted
}

// Phases of an export, in the order they are written, so that a client reading Dir
// while it is written never finds a file named by one it has read that is not there
// yet: files at new names first, then the indexes those name, then the Release files
// that name the indexes, and InRelease, the file apt reads first, last.
const (
	phaseImmutable = iota // pool/ files and by-hash/ copies
	phaseIndex            // indexes at their plain names, and anything else
	phaseRelease          // dists/<suite>/Release and Release.gpg
	phaseInRelease        // dists/<suite>/InRelease
	exportPhases
)

// exportPhase is the phase in which path p is written.
func exportPhase(p string) int {
	if strings.HasPrefix(p, "pool/") || strings.Contains(p, "/by-hash/") {
		return phaseImmutable
	}
	if strings.HasPrefix(p, "dists/") && strings.Count(p, "/") == 2 {
		switch path.Base(p) {
		case "InRelease":
			return phaseInRelease
		case "Release", "Release.gpg":
			return phaseRelease
		}
	}
	return phaseIndex
}

// Export writes every path of a release into Dir with its object's bytes from the
// store, so that Dir is a complete tree (dists/ and pool/) that any static server can
// serve. Each file is written atomically (temporary file, fsync, rename) and checked
// against its size and SHA-256 as it streams from the store; an object that several
// paths share is read from the store once and hard-linked (or copied) to the others.
//
// Export is incremental: a file already in Dir with the listed content is kept (see
// ExportOptions.Verify for when its content is re-hashed). It writes in phases (see
// exportPhase) and starts a phase only once the one before is complete, so a failure
// (an object missing from the store, which is named with its path and the release)
// leaves the indexes and Release files of Dir as they were.
func Export(ctx context.Context, o ExportOptions) (*ExportReport, error) {
	if o.Store == nil {
		return nil, ErrNoStore
	}
	m := o.Manifest
	e := &exporter{o: o, sources: map[manifest.Object]exportSource{}}
	e.report = &ExportReport{Release: m.ID, Store: o.Store.String(), Dir: o.Dir, Verified: o.Verify, Deleted: []string{}}
	paths := m.Paths()
	e.report.Paths = len(paths)
	e.report.Objects = len(m.Objects())
	e.paths = make([]*exportPath, 0, len(paths))
	for p, obj := range paths {
		e.paths = append(e.paths, &exportPath{path: p, obj: obj, phase: exportPhase(p)})
	}
	slices.SortFunc(e.paths, func(a, b *exportPath) int {
		return cmp.Or(cmp.Compare(a.phase, b.phase), strings.Compare(a.path, b.path))
	})
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("export into %s: %w", o.Dir, err)
	}
	if err := e.scan(ctx); err != nil {
		return nil, err
	}
	for ph := range exportPhases {
		if err := e.write(ctx, ph); err != nil {
			return nil, err
		}
	}
	if o.Delete {
		if err := e.delete(paths); err != nil {
			return nil, err
		}
	}
	return e.report, nil
}

// exporter is the state of one Export.
type exporter struct {
	o      ExportOptions
	report *ExportReport
	paths  []*exportPath // by phase, then path

	mu       sync.Mutex
	sources  map[manifest.Object]exportSource // a file of Dir that holds the object
	progress ExportProgress
}

// exportPath is one path of the release.
type exportPath struct {
	path  string
	obj   manifest.Object
	phase int
	// kept: Dir holds the path with the listed size (and, when hashed, content).
	kept, hashed bool
}

// exportSource is a file of Dir holding an object: hashed when its content was checked
// (written or re-hashed by this export), else only its size is known to match.
type exportSource struct {
	path   string
	hashed bool
}

func (e *exporter) file(p string) string { return filepath.Join(e.o.Dir, filepath.FromSlash(p)) }

// scan finds the paths Dir already holds, and counts what is left to write.
func (e *exporter) scan(ctx context.Context) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(cmp.Or(e.o.Jobs, 8))
	for _, p := range e.paths {
		g.Go(func() error { return e.scanPath(gctx, p) })
	}
	if err := g.Wait(); err != nil {
		return err
	}
	for _, p := range e.paths {
		if !p.kept {
			e.progress.PathsTotal++
			e.progress.BytesTotal += p.obj.Size
			continue
		}
		e.report.Kept++
		e.report.BytesKept += p.obj.Size
		if prev, ok := e.sources[p.obj]; !ok || p.hashed && !prev.hashed {
			e.sources[p.obj] = exportSource{p.path, p.hashed}
		}
	}
	return ctx.Err()
}

// scanPath decides whether Dir holds p already: a regular file of the listed size and,
// when it must be hashed, the listed SHA-256.
func (e *exporter) scanPath(ctx context.Context, p *exportPath) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	fi, err := os.Stat(e.file(p.path))
	switch {
	case errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR):
		return nil
	case err != nil:
		return fmt.Errorf("export into %s: %w", e.o.Dir, err)
	case !fi.Mode().IsRegular() || fi.Size() != p.obj.Size:
		return nil
	}
	if !e.o.Verify && p.phase == phaseImmutable {
		p.kept = true
		return nil
	}
	info, err := hashFile(e.file(p.path))
	if err != nil {
		return fmt.Errorf("export into %s: %w", e.o.Dir, err)
	}
	p.kept = info.SHA256 == p.obj.SHA256 && info.Size == p.obj.Size
	p.hashed = p.kept
	return nil
}

func hashFile(name string) (store.Info, error) {
	f, err := os.Open(name)
	if err != nil {
		return store.Info{}, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return store.Info{}, fmt.Errorf("read %s: %w", name, err)
	}
	return store.Info{SHA256: hex.EncodeToString(h.Sum(nil)), Size: n}, nil
}

// write writes the paths of phase ph that Dir lacks, Jobs objects at a time.
func (e *exporter) write(ctx context.Context, ph int) error {
	var order []manifest.Object
	need := map[manifest.Object][]*exportPath{}
	for _, p := range e.paths {
		if p.phase != ph || p.kept {
			continue
		}
		if need[p.obj] == nil {
			order = append(order, p.obj)
		}
		need[p.obj] = append(need[p.obj], p)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(cmp.Or(e.o.Jobs, 8))
	for _, obj := range order {
		if gctx.Err() != nil {
			break
		}
		g.Go(func() error { return e.writeObject(gctx, obj, need[obj]) })
	}
	if err := g.Wait(); err != nil {
		return err
	}
	return ctx.Err()
}

// writeObject writes the paths ps of one object: the first from a file of Dir that holds
// the object, else from the store; the others as links to the first.
func (e *exporter) writeObject(ctx context.Context, obj manifest.Object, ps []*exportPath) error {
	first := ps[0]
	e.mu.Lock()
	src, ok := e.sources[obj]
	e.mu.Unlock()
	written := false
	if ok {
		var err error
		if written, err = e.copyLocal(src, first); err != nil {
			return err
		}
	}
	if !written {
		if err := e.fetch(ctx, first); err != nil {
			return err
		}
	}
	e.mu.Lock()
	e.sources[obj] = exportSource{first.path, true}
	e.mu.Unlock()
	for _, p := range ps[1:] {
		if _, err := e.copyLocal(exportSource{first.path, true}, p); err != nil {
			return err
		}
	}
	return nil
}

// fetch writes p with its object's bytes from the store, checked as they stream.
func (e *exporter) fetch(ctx context.Context, p *exportPath) error {
	rc, err := e.o.Store.Open(ctx, p.obj.SHA256, 0, -1)
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("export release %s: object %s (%d bytes) of %s is missing from store %s%s: %w",
			e.report.Release, p.obj.SHA256, p.obj.Size, p.path, e.o.Store, e.untouched(p.phase), err)
	}
	if err != nil {
		return fmt.Errorf("export release %s: read object %s of %s: %w", e.report.Release, p.obj.SHA256, p.path, err)
	}
	defer rc.Close()
	err = atomicfile.Write(e.file(p.path), 0o644, true, func(w io.Writer) error {
		return e.copyChecked(w, rc, p.obj, func(got store.Info) error {
			return fmt.Errorf("export release %s: object %s of %s in store %s holds %d bytes with sha256 %s, the release lists %d bytes: %w",
				e.report.Release, p.obj.SHA256, p.path, e.o.Store, got.Size, got.SHA256, p.obj.Size, store.ErrDigestMismatch)
		})
	})
	if err != nil {
		return err
	}
	e.mu.Lock()
	e.report.Fetched++
	e.report.BytesFetched += p.obj.Size
	e.mu.Unlock()
	return nil
}

// untouched says what of Dir an export that fails in phase ph leaves as it was.
func (e *exporter) untouched(ph int) string {
	switch ph {
	case phaseImmutable:
		return "; no index or Release file of " + e.o.Dir + " was changed"
	case phaseIndex:
		return "; no Release or InRelease file of " + e.o.Dir + " was changed"
	case phaseRelease:
		return "; no InRelease file of " + e.o.Dir + " was changed"
	}
	return ""
}

// copyLocal writes p from src, a file of Dir holding the same object: a hard link when
// src was hashed, else (or when Dir cannot link) a copy checked as it is written. It
// reports false, having written nothing, when an unhashed src turns out to hold other
// bytes.
func (e *exporter) copyLocal(src exportSource, p *exportPath) (bool, error) {
	if src.hashed && e.link(src.path, p.path) == nil {
		e.linked()
		e.advance(1, p.obj.Size)
		return true, nil
	}
	f, err := os.Open(e.file(src.path))
	if err != nil {
		return false, fmt.Errorf("export: copy %s to %s: %w", src.path, p.path, err)
	}
	defer f.Close()
	errOther := errors.New("other content")
	err = atomicfile.Write(e.file(p.path), 0o644, true, func(w io.Writer) error {
		return e.copyChecked(w, f, p.obj, func(store.Info) error { return errOther })
	})
	switch {
	case errors.Is(err, errOther):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("export: copy %s to %s: %w", src.path, p.path, err)
	}
	e.linked()
	return true, nil
}

func (e *exporter) linked() {
	e.mu.Lock()
	e.report.Linked++
	e.mu.Unlock()
}

// link replaces dst by a hard link to src: a link at a temporary name, renamed over dst.
func (e *exporter) link(src, dst string) error {
	target := e.file(dst)
	dir := filepath.Dir(target)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := atomicfile.Link(e.file(src), target); err != nil {
		return err
	}
	return atomicfile.SyncDir(dir)
}

// copyChecked copies r to w, reading at most one byte more than the object's size, and
// returns mismatch's error unless what it copied has the object's size and SHA-256.
func (e *exporter) copyChecked(w io.Writer, r io.Reader, o manifest.Object, mismatch func(store.Info) error) error {
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(w, h, progressWriter{e}), io.LimitReader(r, o.Size+1))
	if err != nil {
		return err
	}
	got := store.Info{SHA256: hex.EncodeToString(h.Sum(nil)), Size: n}
	if got.Size != o.Size || got.SHA256 != o.SHA256 {
		e.advance(0, -n) // not written after all
		return mismatch(got)
	}
	e.advance(1, 0)
	return nil
}

// progressWriter counts the bytes written towards the progress.
type progressWriter struct{ e *exporter }

func (w progressWriter) Write(b []byte) (int, error) {
	w.e.advance(0, int64(len(b)))
	return len(b), nil
}

// advance counts paths and bytes written, and reports progress.
func (e *exporter) advance(paths int, bytes int64) {
	if e.o.Progress == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.progress.PathsDone += paths
	e.progress.BytesDone += bytes
	e.o.Progress(e.progress)
}

// delete removes the files under Dir/dists and Dir/pool that are not in listed, then
// the directories left empty there (but not dists and pool themselves). dists and pool
// may be symbolic links to directories; a link to a directory below them is left as it
// is, and not followed.
func (e *exporter) delete(listed map[string]manifest.Object) error {
	for _, top := range []string{"dists", "pool"} {
		// The trailing separator makes a top that is a symbolic link to a directory
		// walked as that directory.
		root := e.file(top) + string(filepath.Separator)
		var dirs []string
		err := filepath.WalkDir(root, func(name string, d fs.DirEntry, err error) error {
			if errors.Is(err, fs.ErrNotExist) && name == root {
				return fs.SkipDir
			}
			if err != nil {
				return err
			}
			if d.IsDir() {
				if name != root {
					dirs = append(dirs, name)
				}
				return nil
			}
			if d.Type()&fs.ModeSymlink != 0 {
				if fi, err := os.Stat(name); err == nil && fi.IsDir() {
					return nil // neither followed (it may lead anywhere) nor removed
				}
			}
			rel, err := filepath.Rel(e.o.Dir, name)
			if err != nil {
				return err
			}
			rel = filepath.ToSlash(rel)
			if _, ok := listed[rel]; ok {
				return nil
			}
			if err := os.Remove(name); err != nil {
				return err
			}
			e.report.Deleted = append(e.report.Deleted, rel)
			return nil
		})
		if err != nil {
			return fmt.Errorf("export: delete what release %s does not list from %s: %w", e.report.Release, e.o.Dir, err)
		}
		for _, d := range slices.Backward(dirs) {
			if err := os.Remove(d); err != nil && !errors.Is(err, syscall.ENOTEMPTY) && !errors.Is(err, syscall.EEXIST) {
				return fmt.Errorf("export: delete empty directory: %w", err)
			}
		}
	}
	slices.Sort(e.report.Deleted)
	return nil
}
