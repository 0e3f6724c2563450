package gen_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/armor-apt/armor/gen"
	"github.com/armor-apt/armor/internal/atomicfile"
	"github.com/armor-apt/armor/internal/lineage"
)

// treeEntry is what treeState records of one path: a file's sha256 and mtime, a
// symbolic link's target, or that a directory is there.
type treeEntry struct {
	kind, content string
	modTime       int64
}

// treeState records every file, symbolic link and directory under dir (staging
// directories included: a failed build must not leave one behind).
func treeState(t *testing.T, dir string) map[string]treeEntry {
	t.Helper()
	out := map[string]treeEntry{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		info, err := d.Info()
		if err != nil {
			return err
		}
		var e treeEntry
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			e = treeEntry{kind: "link", content: target}
		case d.IsDir():
			e = treeEntry{kind: "dir"}
		default:
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			e = treeEntry{kind: "file", content: sha256Hex(data), modTime: info.ModTime().UnixNano()}
		}
		out[filepath.ToSlash(rel)] = e
		return nil
	})
	if err != nil {
		t.Fatalf("read the tree %s: %v", dir, err)
	}
	return out
}

func diffTreeStates(before, after map[string]treeEntry) []string {
	var out []string
	for p, b := range before {
		switch a, ok := after[p]; {
		case !ok:
			out = append(out, "removed "+p)
		case a != b:
			out = append(out, "changed "+p)
		}
	}
	for p := range after {
		if _, ok := before[p]; !ok {
			out = append(out, "added "+p)
		}
	}
	slices.Sort(out)
	return out
}

var errInjected = errors.New("injected fault")

// TestEveryFailedStepLeavesTree makes each step of a build fail in turn, after the step
// did its work (inputs collected, the change applied, the staging directory made, the
// pool staged, indexes and Contents written, Release signed, the manifest sealed, a suite
// alias linked, each kind of file renamed into place, the renames synced, the manifest
// written), and checks that the tree (every file's bytes and mtime, every link and
// directory) and manifest.toml are exactly as they were. The build that follows, with the
// fault gone, builds on the same parent.
func TestEveryFailedStepLeavesTree(t *testing.T) {
	steps := []struct {
		name  string
		match func(step string) bool
	}{
		{"collect inputs", is("collect inputs")},
		{"apply change", is("apply change")},
		{"open tree", is("open tree")},
		{"stage pool", is("stage pool")},
		{"write indexes", is("write indexes")},
		{"write contents", is("write contents")},
		{"sign", is("sign")},
		{"seal manifest", is("seal manifest")},
		{"link aliases", is("link aliases")},
		{"rename a pool file", prefixed("rename pool/")},
		{"rename a by-hash file", func(s string) bool { return strings.HasPrefix(s, "rename dists/") && strings.Contains(s, "/by-hash/") }},
		{"rename an index", is("rename dists/stable/main/binary-amd64/Packages.gz")},
		{"rename Contents", prefixed("rename dists/stable/main/Contents-")},
		{"rename Release", is("rename dists/stable/Release")},
		{"rename Release.gpg", is("rename dists/stable/Release.gpg")},
		{"rename InRelease", is("rename dists/stable/InRelease")},
		{"sync renames", is("sync renames")},
		{"manifest write", is("manifest write")},
	}
	for _, step := range steps {
		t.Run(step.name, func(t *testing.T) {
			r := newRepo(t, repoConfig{Real: true, Synth: 4})
			manifestPath := filepath.Join(r.Base, "manifest.toml")
			r.Opts.Manifest = manifestPath
			parent := r.mustBuild().Manifest
			if err := lineage.Recorded(r.Opts.CacheDir, parent.ID); err != nil {
				t.Fatal(err)
			}
			// The change: a new package, and a suite name for the codename (a new link).
			writeOne(t, r.in("new"), "newpkg", "1.0", "amd64", "")
			r.Opts.Suites[0].Suite = "current"
			before := treeState(t, r.Opts.TreeDir)
			manifestBefore := readFile(t, manifestPath)
			statCacheBefore := readFile(t, filepath.Join(r.Opts.CacheDir, "inputs.txt"))

			hit := false
			gen.WithFault(&r.Opts, func(s string) error {
				if step.match(s) && !hit {
					hit = true
					return errInjected
				}
				return nil
			})
			_, err := r.build()
			if !hit {
				t.Fatalf("the build never reached step %s (err %v)", step.name, err)
			}
			if !errors.Is(err, errInjected) {
				t.Fatalf("build with a fault at %s: err %v, want the injected fault", step.name, err)
			}
			if d := diffTreeStates(before, treeState(t, r.Opts.TreeDir)); len(d) > 0 {
				t.Errorf("a build failing at %s changed the tree: %q", step.name, d)
			}
			if got := readFile(t, manifestPath); string(got) != string(manifestBefore) {
				t.Errorf("a build failing at %s changed manifest.toml", step.name)
			}
			if left, _ := filepath.Glob(filepath.Join(r.Base, atomicfile.TempPrefix+"*")); len(left) > 0 {
				t.Errorf("a build failing at %s left %v beside manifest.toml", step.name, left)
			}
			if left, _ := filepath.Glob(filepath.Join(r.Opts.CacheDir, atomicfile.TempPrefix+"*")); len(left) > 0 {
				t.Errorf("a build failing at %s left %v in the build cache", step.name, left)
			}
			if got := readFile(t, filepath.Join(r.Opts.CacheDir, "inputs.txt")); string(got) != string(statCacheBefore) {
				t.Errorf("a build failing at %s changed the stat cache", step.name)
			}

			gen.WithFault(&r.Opts, nil)
			res := r.mustBuild()
			if res.Manifest.Parent != parent.ID || res.Stats.Added != 1 {
				t.Errorf("the build after the failure: parent %s, stats %+v; want parent %s, 1 added", res.Manifest.Parent, res.Stats, parent.ID)
			}
		})
	}
}

func is(name string) func(string) bool { return func(s string) bool { return s == name } }

func prefixed(p string) func(string) bool {
	return func(s string) bool { return strings.HasPrefix(s, p) }
}

func readFile(t *testing.T, p string) []byte {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
