package tree

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/armor-apt/armor/internal/atomicfile"
	"golang.org/x/sync/errgroup"
	"golang.org/x/sys/unix"
)

// Writer stages files in the tree's staging directory and makes them visible in one
// commit: one syncfs for all the data (large files are flushed as they are written, so it
// mostly waits for the small ones), then renames in rank order, then one more syncfs for
// the directories. A crash before Commit leaves only staged files, which the next build
// removes with the directory; a crash during Commit leaves every path either old or new,
// and since InRelease is renamed last a reader never finds a signed Release that names
// an index not yet in place.
//
// A directory of the tree on another mount or device than the tree's root (pool/ on a disk
// of its own, or a btrfs subvolume) cannot take a rename from the staging directory, so its
// files are staged beside their targets, as .armor-tmp-*; a crash leaves those behind. A
// rename that fails all the same (EXDEV) becomes a copy beside the target and a rename.
//
// The staging directory is shared by every build of the tree, so the caller must hold the
// repository's build lock (internal/lockfile).
type Writer struct {
	root         string
	staging      string
	stagingMount mountID
	bg           errgroup.Group // writes started by Go; Commit and Abort wait for them

	mu     sync.Mutex // guards what follows: CopyFile and LinkFile run from several goroutines
	staged []staged
	undo   []undo            // the renames of Commit (and alias links), to put back if the build fails
	made   []string          // directories the build created, to remove if it fails
	dirs   map[string]string // a target directory → the directory its files are staged in
	// dirMounts are the mounts of the directories ensureDir knows to be there.
	dirMounts map[string]mountID
	mounts    map[mountID]string // every mount written to → a directory on it, for syncfs
	written   int64
	linked    int  // files LinkFile staged as links
	flushed   bool // Commit flushed every mount in mounts

	// Fault, when set, is called before each rename of a commit ("rename " and the file's
	// path in the tree) and before the flush that follows them ("sync renames"); an error
	// it returns fails the commit there, as a real one would. Only tests set it.
	Fault func(step string) error
}

type staged struct{ tmp, final string }

// undo is one rename of a commit: the file it replaced (linked aside as backup) or, when
// backup is "", none.
type undo struct {
	final, backup string
	kept          bool // final was there before, with the same content: leave it
}

const tmpPrefix = atomicfile.TempPrefix

// stagingDir is where a build stages its files, inside the tree: on the tree's mount, so
// that each rename into place is atomic, and in one directory, so that what a crashed
// build left is removed at once.
const stagingDir = ".armor-staging"

// Open removes whatever a crashed build left in root's staging directory and
// creates it afresh.
func Open(root string) (*Writer, error) {
	w := &Writer{
		root:      root,
		staging:   filepath.Join(root, stagingDir),
		dirs:      map[string]string{},
		dirMounts: map[string]mountID{},
		mounts:    map[mountID]string{},
	}
	if err := os.RemoveAll(w.staging); err != nil {
		return nil, fmt.Errorf("remove the staging directory a failed build left: %w", err)
	}
	m, err := w.ensureDir(w.staging)
	if err != nil {
		return nil, fmt.Errorf("create staging directory: %w", err)
	}
	w.stagingMount = m
	w.mounts[m] = w.staging
	// One index's forms at once (its .gz, its .xz and the copy the cache keeps): more would
	// only hold more of them in memory while they wait for the disk.
	w.bg.SetLimit(3)
	return w, nil
}

func (w *Writer) tempFor(rel string) (string, error) {
	final := filepath.Join(w.root, filepath.FromSlash(rel))
	in, err := w.stagingFor(filepath.Dir(final))
	if err != nil {
		return "", err
	}
	var rnd [6]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return "", err
	}
	name := hex.EncodeToString(rnd[:]) + "-" + filepath.Base(final)
	if in != w.staging {
		name = tmpPrefix + name
	}
	tmp := filepath.Join(in, name)
	w.mu.Lock()
	w.staged = append(w.staged, staged{tmp, final})
	w.mu.Unlock()
	return tmp, nil
}

// stagingFor makes the directory dir of the tree if it is missing, and returns where
// its files are staged: in the staging directory when dir is on its mount, else beside
// their targets in dir itself.
func (w *Writer) stagingFor(dir string) (string, error) {
	w.mu.Lock()
	in, known := w.dirs[dir]
	w.mu.Unlock()
	if known {
		return in, nil
	}
	// Outside the lock: a first build makes a directory per source package, from several
	// goroutines, and Mkdir is safe to race with itself.
	m, err := w.ensureDir(dir)
	if err != nil {
		return "", fmt.Errorf("create directory %s: %w", dir, err)
	}
	in = w.staging
	if m != w.stagingMount {
		in = dir
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.dirs[dir] = in
	if _, ok := w.mounts[m]; !ok {
		w.mounts[m] = dir
	}
	return in, nil
}

// ensureDir makes dir and its missing parents, remembers those it made, so that a build
// that fails takes them away again (Abort), and returns dir's mount. A directory it makes
// is on its parent's mount, so that only directories that were there are asked (statx):
// a first build of many packages makes a directory per source package, and one mkdir
// each is what it costs.
func (w *Writer) ensureDir(dir string) (mountID, error) {
	w.mu.Lock()
	m, ok := w.dirMounts[dir]
	w.mu.Unlock()
	if ok {
		return m, nil
	}
	err := os.Mkdir(dir, 0o755)
	if errors.Is(err, fs.ErrNotExist) && filepath.Dir(dir) != dir {
		if _, err := w.ensureDir(filepath.Dir(dir)); err != nil {
			return mountID{}, err
		}
		err = os.Mkdir(dir, 0o755)
	}
	switch {
	case err == nil:
		if m, err = w.ensureDir(filepath.Dir(dir)); err != nil {
			return mountID{}, err
		}
		w.mu.Lock()
		w.made = append(w.made, dir)
		w.mu.Unlock()
	case errors.Is(err, fs.ErrExist):
		// There already, or made meanwhile by another goroutine: ask.
		if m, err = mountOf(dir); err != nil {
			return mountID{}, err
		}
	default:
		return mountID{}, err
	}
	w.mu.Lock()
	w.dirMounts[dir] = m
	w.mu.Unlock()
	return m, nil
}

// WriteFile stages data at the slash-separated path rel, and at every path in also as
// hard links of the same file (by-hash copies cost no second write).
func (w *Writer) WriteFile(rel string, data []byte, also ...string) error {
	tmp, err := w.tempFor(rel)
	if err != nil {
		return err
	}
	if err := writeNew(tmp, data); err != nil {
		return fmt.Errorf("write %s: %w", rel, err)
	}
	w.addWritten(int64(len(data)))
	for _, a := range also {
		link, err := w.tempFor(a)
		if err != nil {
			return err
		}
		err = os.Link(tmp, link)
		if errors.Is(err, unix.EXDEV) {
			// The two directories are on different mounts: a copy, then.
			if err = writeNew(link, data); err == nil {
				w.addWritten(int64(len(data)))
			}
		}
		if err != nil {
			return fmt.Errorf("link %s: %w", a, err)
		}
	}
	return nil
}

// writeNew creates the file p with data. A large file is flushed at once, on the calling
// goroutine (indexes are written in the background), so that Commit's syncfs finds little
// left to do: an index of 100,000 packages is 36 MB in its two published forms.
func writeNew(p string, data []byte) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil && len(data) >= 1<<20 {
		err = unix.Fdatasync(int(f.Fd()))
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// fault returns the error Fault injects at step, or nil.
func (w *Writer) fault(step string) error {
	if w.Fault == nil {
		return nil
	}
	return w.Fault(step)
}

// Root is the directory of the tree.
func (w *Writer) Root() string { return w.root }

// Flushed reports whether the last Commit flushed every file system the build wrote to,
// those named by FlushAlso included.
func (w *Writer) Flushed() bool { return w.flushed }

// Staged returns how many files the writer staged, how many bytes it wrote for them, and
// how many of them are links to their source (LinkFile), which wrote none.
func (w *Writer) Staged() (files int, bytes int64, linked int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.staged), w.written, w.linked
}

// Go runs a staging call (WriteFile, CopyFile, LinkFile) in the background; Commit and Abort wait
// for every such call, and Commit fails with the first error.
func (w *Writer) Go(stage func() error) { w.bg.Go(stage) }

// Wait waits for the calls started by Go and returns the first error.
func (w *Writer) Wait() error { return w.bg.Wait() }

// CopyFile stages a copy of the file src at rel. The copy is made by the kernel
// (copy_file_range), which clones the file instead where the file system shares blocks
// copy-on-write (Btrfs, XFS): as cheap as a link, and a later write to src leaves the
// copy as it was.
func (w *Writer) CopyFile(rel, src string) error {
	tmp, err := w.tempFor(rel)
	if err != nil {
		return err
	}
	return w.copyTo(tmp, rel, src)
}

// LinkFile stages the file src at rel as a hard link to it where that is allowed: src on
// the tree's file system, readable by everyone (a link shares its mode with src), and a
// link the kernel permits (fs.protected_hardlinks refuses some). Otherwise it stages a
// copy, as CopyFile does. A link is one system call where a copy writes the file again,
// which a first build of many packages saves (aptly links its pool files the same way,
// by default). The staged file then is src: src must be replaced (written elsewhere and
// renamed), not rewritten in place, while the tree publishes it; gen links only when
// told to (Options.LinkPool).
func (w *Writer) LinkFile(rel, src string) error {
	tmp, err := w.tempFor(rel)
	if err != nil {
		return err
	}
	if st, err := os.Stat(src); err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o444 == 0o444 {
		// AT_SYMLINK_FOLLOW: an input may be a symbolic link; the tree gets its target.
		if unix.Linkat(unix.AT_FDCWD, src, unix.AT_FDCWD, tmp, unix.AT_SYMLINK_FOLLOW) == nil {
			w.mu.Lock()
			w.linked++
			w.mu.Unlock()
			return nil
		}
	}
	return w.copyTo(tmp, rel, src)
}

// copyTo copies the file src to tmp, staged for rel.
func (w *Writer) copyTo(tmp, rel, src string) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("copy %s: %w", src, err)
	}
	defer in.Close()
	out, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("copy %s to %s: %w", src, rel, err)
	}
	n, err := io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("copy %s to %s: %w", src, rel, err)
	}
	w.addWritten(n)
	return nil
}

func (w *Writer) addWritten(n int64) {
	w.mu.Lock()
	w.written += n
	w.mu.Unlock()
}

// Commit makes every staged file visible under its final name.
func (w *Writer) Commit() error {
	if err := w.Wait(); err != nil {
		return err
	}
	if len(w.staged) == 0 {
		os.Remove(w.staging)
		return nil
	}
	if err := w.syncMounts(); err != nil {
		return err
	}
	w.flushed = true
	sort.SliceStable(w.staged, func(i, j int) bool { return rank(w.staged[i].final) < rank(w.staged[j].final) })
	for _, s := range w.staged {
		// Indexes and Release files replace files of the previous release under the same
		// names: each is kept aside (a hard link) until Done, so that a commit that fails
		// here, or a manifest that cannot be written after it, puts the tree back as it
		// was. Pool and by-hash files are named by their content and only ever added.
		u := undo{final: s.final}
		r := rank(s.final)
		if r == 1 {
			// A by-hash name is its content: one in place already stays as it is.
			old, err1 := os.Lstat(s.final)
			nu, err2 := os.Lstat(s.tmp)
			if err1 == nil && err2 == nil && old.Mode().IsRegular() && old.Size() == nu.Size() {
				os.Remove(s.tmp)
				continue
			}
		}
		if r >= 2 {
			b := s.tmp + ".prev"
			switch err := os.Link(s.final, b); {
			case err == nil:
				u.backup = b
			case !errors.Is(err, fs.ErrNotExist):
				w.Rollback()
				return fmt.Errorf("keep %s aside while the tree changes: %w", s.final, err)
			}
		}
		// Only a pool file's existence matters below: an index or Release file's is told
		// by its backup, and a by-hash file was looked at above.
		existed := false
		if r == 0 {
			_, statErr := os.Lstat(s.final)
			existed = statErr == nil
		}
		err := w.fault("rename " + w.rel(s.final))
		if err == nil {
			err = os.Rename(s.tmp, s.final)
		}
		if errors.Is(err, unix.EXDEV) {
			// A directory that looked like the tree's mount and is not one for rename (a
			// btrfs subvolume, or a directory of another project quota, has the same mount
			// id): the file goes over by a copy beside its target.
			err = moveAcross(s.tmp, s.final)
		}
		if err == nil && u.backup == "" && r == 0 {
			// A pool file that was there already (the same bytes: a pool path is one
			// file) is not taken away by a rollback.
			u.kept = existed
		}
		if err != nil {
			if u.backup != "" {
				os.Remove(u.backup)
			}
			w.Rollback()
			return fmt.Errorf("rename into place %s: %w", s.final, err)
		}
		w.undo = append(w.undo, u)
	}
	// One more syncfs makes the renames durable: it flushes the directories' metadata
	// together, where an fsync per directory costs a journal commit each (thousands of
	// them in a first build).
	if err := cmp.Or(w.syncMounts(), w.fault("sync renames")); err != nil {
		w.Rollback()
		return err
	}
	w.staged = nil
	return nil
}

// rel is the slash-separated path of a tree file, as Fault is told it.
func (w *Writer) rel(final string) string {
	r, err := filepath.Rel(w.root, final)
	if err != nil {
		return final
	}
	return filepath.ToSlash(r)
}

// Rollback puts back, newest first, the files a Commit replaced, and removes those it
// added under names that were free.
func (w *Writer) Rollback() {
	for i := len(w.undo) - 1; i >= 0; i-- {
		u := w.undo[i]
		switch {
		case u.backup != "":
			os.Rename(u.backup, u.final)
		case !u.kept:
			os.Remove(u.final)
		}
	}
	w.undo = nil
	Sync(w.root)
}

// Done drops what Rollback would need: the commit stands. It removes the staging
// directory; should that fail, the tree is complete all the same, and the next build
// removes it.
func (w *Writer) Done() {
	for _, u := range w.undo {
		if u.backup != "" {
			os.Remove(u.backup)
		}
	}
	w.undo = nil
	os.RemoveAll(w.staging)
}

// rank orders the renames of a commit so that whatever a file names is in place before
// it: pool files, then by-hash copies, then indexes, then Release and Release.gpg, and
// InRelease last.
func rank(path string) int {
	base := filepath.Base(path)
	switch {
	case strings.Contains(filepath.ToSlash(path), "/pool/"):
		return 0
	case strings.Contains(filepath.ToSlash(path), "/by-hash/"):
		return 1
	case base == "InRelease":
		return 4
	case base == "Release" || base == "Release.gpg":
		return 3
	}
	return 2
}

// Abort ends a build that failed: it puts back what a commit (or an alias link)
// changed, if Rollback has not already, removes every staged file and the staging
// directory, and the directories the build made, which are empty again. It is never
// called once a commit stands (Done).
func (w *Writer) Abort() {
	w.bg.Wait()
	if len(w.undo) > 0 {
		w.Rollback()
	}
	for _, s := range w.staged {
		if filepath.Dir(s.tmp) != w.staging {
			os.Remove(s.tmp)
		}
	}
	os.RemoveAll(w.staging)
	w.staged = nil
	// Deepest first; one that holds something (a file put there meanwhile) stays.
	slices.SortFunc(w.made, func(a, b string) int { return len(b) - len(a) })
	for _, d := range w.made {
		os.Remove(d)
	}
	w.made = nil
}

// FlushAlso has Commit flush the file system of dir too, where a file to put in place
// after the commit was written, and reports whether it will (if the commit has files to
// put in place, which Flushed then reports).
func (w *Writer) FlushAlso(dir string) bool {
	m, err := mountOf(dir)
	if err != nil {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.mounts[m]; !ok {
		w.mounts[m] = dir
	}
	return true
}

// syncMounts flushes every mount the build wrote to: the tree's, and any other that one
// of its directories is on.
func (w *Writer) syncMounts() error {
	for _, dir := range w.mounts {
		if err := Sync(dir); err != nil {
			return err
		}
	}
	return nil
}

// moveAcross moves the file tmp to final where rename cannot: it copies tmp to a
// temporary file beside final, flushes it, renames it into place, flushes the directory
// and removes tmp.
func moveAcross(tmp, final string) error {
	in, err := os.Open(tmp)
	if err != nil {
		return err
	}
	defer in.Close()
	err = atomicfile.Write(final, 0o644, true, func(w io.Writer) error {
		_, err := io.Copy(w, in)
		return err
	})
	if err != nil {
		return err
	}
	os.Remove(tmp)
	return nil
}

// mountID identifies where a directory is for rename: its mount (the kernel reports mount
// ids from Linux 5.8; they tell bind mounts of one file system apart) and its device (which
// tells btrfs subvolumes apart). Two directories with the same mountID may still refuse a
// rename between them; Commit copies then.
type mountID struct{ mnt, dev uint64 }

func mountOf(dir string) (mountID, error) {
	var st unix.Statx_t
	err := unix.Statx(unix.AT_FDCWD, dir, unix.AT_STATX_DONT_SYNC, unix.STATX_MNT_ID, &st)
	if err == nil {
		id := mountID{dev: unix.Mkdev(st.Dev_major, st.Dev_minor)}
		if st.Mask&unix.STATX_MNT_ID != 0 {
			id.mnt = st.Mnt_id
		}
		return id, nil
	}
	if !errors.Is(err, unix.ENOSYS) && !errors.Is(err, unix.EPERM) {
		return mountID{}, fmt.Errorf("stat %s: %w", dir, err)
	}
	// No statx (before Linux 4.11, or denied by a seccomp filter): the device alone.
	var fi unix.Stat_t
	if err := unix.Stat(dir, &fi); err != nil {
		return mountID{}, fmt.Errorf("stat %s: %w", dir, err)
	}
	return mountID{dev: uint64(fi.Dev)}, nil
}

// Sync flushes every dirty page of the file system holding root in one call, which
// is far cheaper than an fsync per file when a build stages thousands of pool files.
func Sync(root string) error {
	f, err := os.Open(root)
	if err != nil {
		return fmt.Errorf("sync %s: %w", root, err)
	}
	defer f.Close()
	if err := unix.Syncfs(int(f.Fd())); err != nil {
		return fmt.Errorf("sync %s: %w", root, err)
	}
	return nil
}

// ErrNotLink is the error of Symlink when its path holds something other than a symbolic
// link.
var ErrNotLink = errors.New("not a symbolic link")

// Symlink makes the slash-separated path rel a symbolic link to target. A link to target
// is kept as it is; a link elsewhere is replaced atomically, and put back by Rollback or
// Abort until Done; anything else at rel is an error wrapping ErrNotLink.
func (w *Writer) Symlink(rel, target string) error {
	p := filepath.Join(w.root, filepath.FromSlash(rel))
	old, err := os.Readlink(p)
	switch {
	case err == nil && old == target:
		return nil
	case err == nil, errors.Is(err, fs.ErrNotExist):
	default:
		if st, serr := os.Lstat(p); serr == nil && st.Mode()&fs.ModeSymlink == 0 {
			return fmt.Errorf("%s: %w", p, ErrNotLink)
		}
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	tmp := p + ".armor-link"
	os.Remove(tmp)
	u := undo{final: p}
	if old != "" {
		// The old link, kept aside (a hard link of the link itself) until Done.
		u.backup = p + ".armor-link-prev"
		os.Remove(u.backup)
		if err := os.Link(p, u.backup); err != nil {
			return fmt.Errorf("keep %s aside while the tree changes: %w", p, err)
		}
	}
	if err := os.Symlink(target, tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, p); err != nil {
		os.Remove(tmp)
		if u.backup != "" {
			os.Remove(u.backup)
		}
		return err
	}
	w.mu.Lock()
	w.undo = append(w.undo, u)
	w.mu.Unlock()
	return nil
}
