package tree

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// otherMount returns a new directory on another file system than the test's temporary
// directory: under /dev/shm, a tmpfs.
func otherMount(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("/dev/shm", "armor-tree-")
	if err != nil {
		t.Fatalf("this test needs a tmpfs at /dev/shm: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	a, errA := mountOf(dir)
	b, errB := mountOf(t.TempDir())
	if errA != nil || errB != nil || a == b {
		t.Fatalf("/dev/shm and %s are one mount (%v, %v)", os.TempDir(), errA, errB)
	}
	return dir
}

// TestCommitWhereRenameFails: a directory that looks like the tree's mount but refuses a
// rename from the staging directory (as a btrfs subvolume does) gets its files by a copy
// beside them, and the commit completes with nothing left behind. So does a by-hash
// directory on another mount than its index, whose hard link cannot be made.
func TestCommitWhereRenameFails(t *testing.T) {
	root := t.TempDir()
	elsewhere := otherMount(t)
	for _, d := range []string{"pool", "by-hash"} {
		if err := os.Mkdir(filepath.Join(elsewhere, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(elsewhere, "pool"), filepath.Join(root, "pool")); err != nil {
		t.Fatal(err)
	}
	byHash := filepath.Join(root, "dists", "stable", "main", "binary-amd64", "by-hash")
	if err := os.MkdirAll(filepath.Dir(byHash), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(elsewhere, "by-hash"), byHash); err != nil {
		t.Fatal(err)
	}
	w, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	// Let the pool's directory pass for one on the tree's mount, so that its file is staged
	// in the staging directory and the rename at Commit fails with EXDEV.
	poolDir := filepath.Join(root, "pool", "main", "h", "hello")
	if err := os.MkdirAll(poolDir, 0o755); err != nil {
		t.Fatal(err)
	}
	w.dirs[poolDir] = w.staging

	files := map[string]string{
		"pool/main/h/hello/hello_1_amd64.deb":                      "a package\n",
		"dists/stable/main/binary-amd64/Packages":                  "an index\n",
		"dists/stable/main/binary-amd64/by-hash/SHA256/0123456789": "an index\n",
		"dists/stable/InRelease":                                   "signed\n",
	}
	if err := w.WriteFile("pool/main/h/hello/hello_1_amd64.deb", []byte(files["pool/main/h/hello/hello_1_amd64.deb"])); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteFile("dists/stable/main/binary-amd64/Packages", []byte("an index\n"), "dists/stable/main/binary-amd64/by-hash/SHA256/0123456789"); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteFile("dists/stable/InRelease", []byte("signed\n")); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(); err != nil {
		t.Fatalf("commit: %v", err)
	}
	w.Done()
	for rel, want := range files {
		got, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
		if err != nil || string(got) != want {
			t.Errorf("%s: %q, %v; want %q", rel, got, err, want)
		}
	}
	for _, dir := range []string{root, elsewhere} {
		err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err == nil && strings.HasPrefix(d.Name(), ".armor-") {
				t.Errorf("left behind: %s", p)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestLinkFile: a pool file is staged as a hard link to its source on the tree's file
// system, through a symbolic link to it too; a source others may not read, or one on
// another file system, is copied. Either way the committed file has the source's bytes.
func TestLinkFile(t *testing.T) {
	root := t.TempDir()
	src := t.TempDir()
	write := func(dir, name string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("package "+name+"\n"), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil { // whatever the umask
			t.Fatal(err)
		}
		return p
	}
	readable := write(src, "a.deb", 0o644)
	private := write(src, "b.deb", 0o600)
	elsewhere := write(otherMount(t), "c.deb", 0o644)
	symlink := filepath.Join(src, "d.deb")
	if err := os.Symlink(readable, symlink); err != nil {
		t.Fatal(err)
	}
	w, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		src, rel string
		linked   bool
	}{
		{readable, "pool/main/a/a/a.deb", true},
		{private, "pool/main/b/b/b.deb", false},
		{elsewhere, "pool/main/c/c/c.deb", false},
		{symlink, "pool/main/d/d/d.deb", true},
	}
	for _, c := range cases {
		if err := w.LinkFile(c.rel, c.src); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	w.Done()
	for _, c := range cases {
		dst := filepath.Join(root, filepath.FromSlash(c.rel))
		a, errA := os.Stat(c.src)
		b, errB := os.Lstat(dst)
		if errA != nil || errB != nil {
			t.Fatal(errA, errB)
		}
		if got := os.SameFile(a, b); got != c.linked {
			t.Errorf("%s from %s: linked %v, want %v", c.rel, c.src, got, c.linked)
		}
		want, _ := os.ReadFile(c.src)
		if got, err := os.ReadFile(dst); err != nil || string(got) != string(want) || !b.Mode().IsRegular() {
			t.Errorf("%s: %q (%v), mode %v; want %q in a regular file", c.rel, got, err, b.Mode(), want)
		}
		if !c.linked && b.Mode().Perm() != 0o644 {
			t.Errorf("%s: a copy has mode %v, want 0644", c.rel, b.Mode().Perm())
		}
	}
}
