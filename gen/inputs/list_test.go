package inputs

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/bmatcuk/doublestar/v4"
)

// The fast walk for "*.deb" and "**/*.deb" finds exactly what doublestar.GlobWalk finds.
func TestWalkSimpleMatchesGlobWalk(t *testing.T) {
	base := t.TempDir()
	for _, p := range []string{
		"debs/a_1_amd64.deb", "debs/b_1_all.deb", "debs/.hidden.deb", "debs/notes.txt",
		"debs/a/c_1_amd64.deb", "debs/a.deb/inside.deb", "debs/z/y/x/deep_1_amd64.deb",
		"debs/z/y/readme", "other/o_1_amd64.deb",
	} {
		full := filepath.Join(base, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// A symbolic link to a directory is followed; one to a file is listed.
	if err := os.Symlink(filepath.Join(base, "other"), filepath.Join(base, "debs", "linked")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(base, "other", "o_1_amd64.deb"), filepath.Join(base, "debs", "l_1_amd64.deb")); err != nil {
		t.Fatal(err)
	}
	for _, pat := range []string{
		"debs/*.deb", "debs/**/*.deb", "debs/a/*.deb", "debs/**/{a,c}*.deb", "debs/**/*",
		"debs/*", "missing/**/*.deb", "debs/a_1_amd64.deb/*.deb", "debs/**/[a-c]_1_*.deb",
	} {
		t.Run(pat, func(t *testing.T) {
			root, rel := doublestar.SplitPattern(filepath.ToSlash(filepath.Join(base, pat)))
			var want []string
			err := doublestar.GlobWalk(os.DirFS(root), rel, func(p string, d fs.DirEntry) error {
				want = append(want, filepath.Join(root, filepath.FromSlash(p)))
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			slices.Sort(want)
			files, unmatched, err := Expand(context.Background(), base, []string{pat})
			if err != nil {
				t.Fatal(err)
			}
			if (len(want) == 0) != (len(unmatched) == 1) {
				t.Errorf("Expand(%q) reports %q as matching nothing; it matches %d files", pat, unmatched, len(want))
			}
			var got []string
			for _, f := range files {
				got = append(got, f.Path)
			}
			if !slices.Equal(got, want) {
				t.Errorf("Expand(%q)\n got %q\nwant %q", pat, got, want)
			}
		})
	}
}

// TestInputsSymlinkLoop: a symbolic link loop among the inputs (a link to the directory
// itself, and to its parent) is walked once, by both walks, and a cancelled build stops
// walking.
func TestInputsSymlinkLoop(t *testing.T) {
	base := t.TempDir()
	for _, f := range []string{"debs/a_1_amd64.deb", "debs/loop/b_1_amd64.deb"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(base, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(base, f), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("../loop", filepath.Join(base, "debs", "loop", "self")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(".", filepath.Join(base, "debs", "loop", "dot")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("..", filepath.Join(base, "debs", "loop", "up")); err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(base, "debs/a_1_amd64.deb"), filepath.Join(base, "debs/loop/b_1_amd64.deb")}
	for _, pat := range []string{"debs/**/*.deb", "debs/**/{a,b}_*.deb"} {
		t.Run(pat, func(t *testing.T) {
			type answer struct {
				files []File
				err   error
			}
			done := make(chan answer, 1)
			go func() {
				files, _, err := Expand(context.Background(), base, []string{pat})
				done <- answer{files, err}
			}()
			var a answer
			select {
			case a = <-done:
			case <-time.After(20 * time.Second):
				t.Fatal("expandInputs did not end within 20s: it follows the link loop")
			}
			if a.err != nil {
				t.Fatal(a.err)
			}
			var got []string
			for _, f := range a.files {
				got = append(got, f.Path)
			}
			if !slices.Equal(got, want) {
				t.Errorf("Expand(%q)\n got %q\nwant %q", pat, got, want)
			}
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			if _, _, err := Expand(ctx, base, []string{pat}); !errors.Is(err, context.Canceled) {
				t.Errorf("Expand(%q) with a cancelled context: %v, want context.Canceled", pat, err)
			}
		})
	}
}
