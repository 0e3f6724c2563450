package gen_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/armor-apt/armor/gen"
	"github.com/armor-apt/armor/internal/testkit/apttest"
	"github.com/armor-apt/armor/internal/testkit/synth"
	"github.com/armor-apt/armor/manifest"
)

// writeDebFiles writes a package installing files (paths relative to the root) into dir.
func writeDebFiles(t testing.TB, dir, name, version, arch, section string, files ...string) string {
	t.Helper()
	control := fmt.Sprintf("Package: %s\nVersion: %s\nArchitecture: %s\nMaintainer: Test <t@example.invalid>\nSection: %s\nDescription: test package\n", name, version, arch, section)
	d := synth.Deb{Control: []byte(control)}
	for _, f := range files {
		d.Files = append(d.Files, synth.File{Path: f, Data: []byte(name + " " + version + "\n")})
	}
	var b bytes.Buffer
	if err := synth.Encode(&b, d); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name+"_"+version+"_"+arch+".deb")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, p, b.Bytes())
	return p
}

// contentsLines returns a Contents file, published as .gz only, as "path packages"
// lines, checking that they are sorted by path.
func contentsLines(t *testing.T, r *repo, arch string) []string {
	t.Helper()
	plain := readIndex(t, r, contentsOf(arch))
	var out []string
	prev := ""
	for _, l := range strings.Split(strings.TrimSuffix(string(plain), "\n"), "\n") {
		if l == "" {
			continue
		}
		f := strings.Fields(l)
		path := strings.Join(f[:len(f)-1], " ")
		if path <= prev {
			t.Errorf("Contents-%s: %q does not sort after %q", arch, path, prev)
		}
		prev = path
		out = append(out, path+" "+f[len(f)-1])
	}
	return out
}

// TestContentsFormat: a Contents file lists every file of the index's packages in
// Debian's format, Architecture: all packages in every architecture's file, each path
// once with every package that installs it.
func TestContentsFormat(t *testing.T) {
	r := newRepo(t, repoConfig{})
	writeDebFiles(t, r.in("a"), "tool", "1.0", "amd64", "utils", "usr/bin/tool", "usr/share/man/man1/tool.1.gz", "etc/shared.conf")
	writeDebFiles(t, r.in("a"), "tool-data", "1.0", "all", "contrib/misc", "usr/share/tool/data", "etc/shared.conf")
	writeDebFiles(t, r.in("a"), "armtool", "1.0", "arm64", "utils", "usr/bin/armtool")
	res := r.mustBuild()
	if res.Stats.ContentsWritten != 2 {
		t.Errorf("ContentsWritten %d, want 2", res.Stats.ContentsWritten)
	}
	got := contentsLines(t, r, "amd64")
	want := []string{
		"etc/shared.conf utils/tool,contrib/misc/tool-data",
		"usr/bin/tool utils/tool",
		"usr/share/man/man1/tool.1.gz utils/tool",
		"usr/share/tool/data contrib/misc/tool-data",
	}
	if !slices.Equal(got, want) {
		t.Errorf("Contents-amd64\n got %q\nwant %q", got, want)
	}
	if got, want := contentsLines(t, r, "arm64"), []string{
		"etc/shared.conf contrib/misc/tool-data",
		"usr/bin/armtool utils/armtool",
		"usr/share/tool/data contrib/misc/tool-data",
	}; !slices.Equal(got, want) {
		t.Errorf("Contents-arm64\n got %q\nwant %q", got, want)
	}
	// dak's layout: the path padded to 55 columns, then a space.
	if first := strings.SplitN(string(readIndex(t, r, contentsOf("amd64"))), "\n", 2)[0]; first != fmt.Sprintf("%-55s %s", "etc/shared.conf", "utils/tool,contrib/misc/tool-data") {
		t.Errorf("first line %q is not in dak's layout", first)
	}
	release := string(readTree(t, r, "dists/stable/Release"))
	for _, p := range []string{"main/Contents-amd64", "main/Contents-amd64.gz", "main/Contents-arm64", "main/Contents-arm64.gz"} {
		if !strings.Contains(release, " "+p+"\n") {
			t.Errorf("Release does not list %s", p)
		}
	}
}

// TestContentsIncremental: after each change, the Contents files a build derives from
// its parent's are those a first build of the same packages writes; only the files of
// the index that changed are written; a version that is not the newest of its name does
// not show, and the older version's files come back when the newest leaves.
func TestContentsIncremental(t *testing.T) {
	r := newRepo(t, repoConfig{Real: true, Synth: 4})
	r.Opts.Suites[0].Sync = true
	r.Opts.Suites[0].MaxRemovals = 1
	r.mustBuild()
	steps := []struct {
		name      string
		change    func()
		want, not string // a line that must be there, a package that must not
		written   int
	}{
		{"add one", func() {
			writeDebFiles(t, r.in("x"), "tool", "1.0", "amd64", "utils", "usr/bin/tool", "usr/lib/tool/v1")
		}, "usr/lib/tool/v1 utils/tool", "", 1},
		{"add arch all", func() { writeDebFiles(t, r.in("x"), "docs", "1.0", "all", "doc", "usr/share/doc/docs/a b") }, "usr/share/doc/docs/a b doc/docs", "", 2},
		{"newer version", func() {
			writeDebFiles(t, r.in("x"), "tool", "2.0", "amd64", "admin", "usr/bin/tool", "usr/lib/tool/v2")
		}, "usr/lib/tool/v2 admin/tool", "utils/tool", 1},
		{"older version", func() { writeDebFiles(t, r.in("x"), "tool", "0.5", "amd64", "utils", "usr/lib/tool/v0") }, "usr/lib/tool/v2 admin/tool", "utils/tool", 0},
		{"newest leaves", func() { os.Remove(r.in("x/tool_2.0_amd64.deb")) }, "usr/lib/tool/v1 utils/tool", "admin/tool", 1},
		{"remove one", func() { os.Remove(r.in("real/natpmpc_20150609-7.1+b2_amd64.deb")) }, "usr/lib/tool/v1 utils/tool", "natpmpc", 1},
		{"remove all", func() { os.Remove(r.in("x/docs_1.0_all.deb")) }, "usr/lib/tool/v1 utils/tool", "docs", 2},
	}
	for _, s := range steps {
		s.change()
		res := r.mustBuild()
		if res.Stats.ContentsWritten != s.written {
			t.Errorf("%s: ContentsWritten %d, want %d", s.name, res.Stats.ContentsWritten, s.written)
		}
		got := contentsLines(t, r, "amd64")
		if !slices.Contains(got, s.want) {
			t.Errorf("%s: Contents-amd64 lacks %q:\n%s", s.name, s.want, strings.Join(got, "\n"))
		}
		if s.not != "" && slices.ContainsFunc(got, func(l string) bool { return strings.Contains(l, s.not) }) {
			t.Errorf("%s: Contents-amd64 still lists %s:\n%s", s.name, s.not, strings.Join(got, "\n"))
		}
		// A first build of the same inputs.
		f := freshRunner(t, r)
		f.Last = nil
		f.Opts.BaseDir = r.Opts.BaseDir
		scratch := f.mustBuild()
		assertSameFiles(t, s.name, scratch.Manifest, res.Manifest, "/Contents-")
	}
}

// assertSameFiles compares the manifest entries of two releases' files whose paths
// contain part.
func assertSameFiles(t *testing.T, what string, got, want *manifest.Manifest, part string) {
	t.Helper()
	pick := func(m *manifest.Manifest) []manifest.File {
		var out []manifest.File
		for _, f := range m.Files {
			if strings.Contains(f.Path, part) {
				out = append(out, f)
			}
		}
		return out
	}
	g, w := pick(got), pick(want)
	if len(w) == 0 || !slices.Equal(g, w) {
		t.Errorf("%s: files %s\n got %v\nwant %v", what, part, g, w)
	}
}

// TestContentsFreshRunnerOlderVersion: a fresh runner that removes the newest version of
// a package lists the files of the version before it, which the parent's Contents file
// does not hold: it reads them from the package's .deb in the store, and publishes what
// the machine with every .deb publishes.
func TestContentsFreshRunnerOlderVersion(t *testing.T) {
	r := newRepo(t, repoConfig{Synth: 2})
	writeDebFiles(t, r.in("x"), "tool", "1.0", "amd64", "utils", "usr/lib/tool/v1")
	writeDebFiles(t, r.in("x"), "tool", "2.0", "amd64", "utils", "usr/lib/tool/v2")
	parent := r.mustBuild().Manifest
	st, dists := storeOf(t, r.Opts.TreeDir, parent), distsStoreOf(t, r.Opts.TreeDir, parent)

	rm := []gen.Removal{{Name: "tool", Version: "2.0"}}
	f := freshRunner(t, r)
	f.Last = parent
	f.Opts.Fetch = st.fetch
	f.Opts.Remove = rm
	got := f.mustBuild()

	os.Remove(r.in("x/tool_2.0_amd64.deb"))
	r.Opts.Remove = rm
	want := r.mustBuild()
	assertSameRelease(t, got.Manifest, want.Manifest)
	if l := contentsLines(t, f, "amd64"); !slices.Contains(l, "usr/lib/tool/v1 utils/tool") || slices.ContainsFunc(l, func(s string) bool { return strings.Contains(s, "v2") }) {
		t.Errorf("Contents-amd64 after removing tool 2.0:\n%s", strings.Join(l, "\n"))
	}

	// With only the parent's dists/ files in the store, the runner cannot know the older
	// version's files: the build fails, naming the package.
	g := freshRunner(t, r)
	g.Last = parent
	g.Opts.Remove = rm
	g.Opts.Fetch = dists.fetch
	if _, err := g.build(); err == nil || !strings.Contains(err.Error(), "tool 1.0") {
		t.Errorf("fresh runner without the pool files: %v, want an error naming tool 1.0", err)
	}
}

// aptFile returns apt-file run with a's configuration, after installing apt-file's index
// targets (its apt.conf.d snippet) into it, so that apt-get update fetches Contents.
func aptFile(t *testing.T, a *apttest.Apt, args ...string) string {
	t.Helper()
	for _, tool := range []string{"apt-file", "apt-get"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed: run .ci/install-deps", tool)
		}
	}
	cmd := exec.Command("apt-file", args...)
	cmd.Env = append(os.Environ(), "APT_CONFIG="+filepath.Join(a.Root, "etc/apt.conf"), "LC_ALL=C")
	out, err := cmd.CombinedOutput()
	if err != nil && !(len(args) > 0 && args[0] == "search" && len(out) == 0) {
		t.Fatalf("apt-file %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// installAptFileTargets copies apt-file's index targets into a's configuration.
func installAptFileTargets(t *testing.T, a *apttest.Apt) {
	t.Helper()
	const conf = "/etc/apt/apt.conf.d/50apt-file.conf"
	data, err := os.ReadFile(conf)
	if err != nil {
		t.Fatalf("apt-file's %s: %v (run .ci/install-deps)", conf, err)
	}
	writeFile(t, filepath.Join(a.Root, "etc/apt.conf.d/50apt-file.conf"), data)
}

// TestAptFile: the real apt-get update fetches the Contents files (by hash, when forced),
// and apt-file search finds a file of a published package; after an incremental build
// that adds a package, it finds the new package's file too, and no longer the file of
// a package removed.
func TestAptFile(t *testing.T) {
	r := newRepo(t, repoConfig{Real: true, Synth: 4})
	r.Opts.Suites[0].Sync = true
	r.Opts.Suites[0].MaxRemovals = 1
	r.mustBuild()
	srv := serveTree(t, r.Opts.TreeDir)
	a := newApt(t, r, srv.URL, "force")
	installAptFileTargets(t, a)
	a.Update(t)
	reqs := srv.requests()
	assertByHashOnly(t, reqs)
	if i := slices.IndexFunc(r.Last.Files, func(f manifest.File) bool { return f.Path == contentsOf("amd64")+".gz" }); i < 0 {
		t.Errorf("the release lists no %s.gz", contentsOf("amd64"))
	} else if !slices.Contains(reqs, "/"+contentsByHash+"SHA256/"+r.Last.Files[i].SHA256) {
		t.Errorf("apt did not fetch Contents-amd64.gz by hash: %v", reqs)
	}
	if out := aptFile(t, a, "search", "/usr/bin/natpmpc"); !strings.Contains(out, "natpmpc: /usr/bin/natpmpc") {
		t.Errorf("apt-file search /usr/bin/natpmpc:\n%s", out)
	}
	if out := aptFile(t, a, "list", "natpmp-utils"); !strings.Contains(out, "natpmp-utils: /usr/share/doc/natpmp-utils/copyright") {
		t.Errorf("apt-file list natpmp-utils (Architecture: all):\n%s", out)
	}

	writeDebFiles(t, r.in("x"), "tool", "1.0", "amd64", "utils", "usr/bin/armor-tool")
	os.Remove(r.in("real/natpmpc_20150609-7.1+b2_amd64.deb"))
	r.mustBuild()
	a.Update(t)
	if out := aptFile(t, a, "search", "armor-tool"); !strings.Contains(out, "tool: /usr/bin/armor-tool") {
		t.Errorf("after adding tool, apt-file search armor-tool:\n%s", out)
	}
	if out := aptFile(t, a, "search", "/usr/bin/natpmpc"); strings.Contains(out, "natpmpc:") {
		t.Errorf("after removing natpmpc, apt-file still finds it:\n%s", out)
	}
}
