package gen_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// mirrorRepo builds a repository with binary packages and a source package, serves it
// over HTTP on 127.0.0.1 and returns it with the server's host:port and a keyring file.
func mirrorRepo(t *testing.T) (*repo, string, string) {
	t.Helper()
	r := newRepo(t, repoConfig{Synth: 2, Archs: []string{"amd64"}})
	r.Opts.Suites[0].Inputs["main"] = []string{"in/**/*"}
	writeSource(t, r.in("src"), "1.0-1", "first")
	r.mustBuild()
	srv := serveTree(t, r.Opts.TreeDir)
	keyring := filepath.Join(t.TempDir(), "repo.gpg")
	writeFile(t, keyring, publicKeyring(t, r.Opts.Key))
	return r, strings.TrimPrefix(srv.URL, "http://"), keyring
}

// poolFiles returns every file under dir/pool, relative to dir, with its bytes.
func poolFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	filepath.WalkDir(filepath.Join(dir, "pool"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			data, _ := os.ReadFile(p)
			rel, _ := filepath.Rel(dir, p)
			out[filepath.ToSlash(rel)] = data
		}
		return nil
	})
	return out
}

// TestDebmirrorSource: the real debmirror, checking the signature, mirrors the source
// packages (--source) with the binaries, byte for byte.
func TestDebmirrorSource(t *testing.T) {
	tool(t, "debmirror")
	r, host, keyring := mirrorRepo(t)
	dir := t.TempDir()
	mirror := filepath.Join(dir, "mirror")
	cmd := exec.Command("debmirror", "--host="+host, "--root=/", "--method=http",
		"--dist=stable", "--section=main", "--arch=amd64", "--source", "--diff=none",
		"--rsync-extra=none", "--check-gpg", "--keyring="+keyring, "--verbose", mirror)
	cmd.Env = append(os.Environ(), "HOME="+dir, "GNUPGHOME="+filepath.Join(dir, "gnupg"), "http_proxy=", "HTTP_PROXY=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("debmirror: %v\n%s", err, out)
	}
	want := poolFiles(t, r.Opts.TreeDir)
	got := poolFiles(t, mirror)
	if len(got) != len(want) {
		t.Errorf("the mirror has %d pool files, the tree %d", len(got), len(want))
	}
	for p, data := range want {
		if !bytes.Equal(got[p], data) {
			t.Errorf("mirror's %s differs from the tree's", p)
		}
	}
	if _, ok := got["pool/main/h/hello/hello_1.0.orig.tar.gz"]; !ok {
		t.Errorf("debmirror --source did not fetch the orig tarball; got %d files", len(got))
	}
	if t.Failed() {
		t.Logf("debmirror output:\n%s", out)
	}
}

// aptly runs the real aptly with its root in dir.
func aptly(t *testing.T, dir string, args ...string) string {
	t.Helper()
	conf := filepath.Join(dir, "aptly.conf")
	if _, err := os.Stat(conf); err != nil {
		data, _ := json.Marshal(map[string]any{"rootDir": filepath.Join(dir, "root"), "gpgProvider": "internal", "downloadConcurrency": 2})
		writeFile(t, conf, data)
	}
	cmd := exec.Command("aptly", append([]string{"-config=" + conf}, args...)...)
	cmd.Env = append(os.Environ(), "HOME="+dir, "http_proxy=", "HTTP_PROXY=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("aptly %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestAptlyMirror: the real aptly, checking the signature, mirrors the repository with
// its source packages (-with-sources).
func TestAptlyMirror(t *testing.T) {
	tool(t, "aptly")
	_, host, keyring := mirrorRepo(t)
	dir := t.TempDir()
	aptly(t, dir, "mirror", "create", "-with-sources", "-keyring="+keyring, "-architectures=amd64", "m", "http://"+host+"/", "stable", "main")
	aptly(t, dir, "mirror", "update", "-keyring="+keyring, "m")
	out := aptly(t, dir, "mirror", "show", "-with-packages", "m")
	for _, want := range []string{"hello_1.0-1_source", "pkg000000_"} {
		if !strings.Contains(out, want) {
			t.Errorf("aptly's mirror lacks %s:\n%s", want, out)
		}
	}
}
