package apttest

import (
	"bytes"
	"compress/gzip"
	"crypto/md5"
	"crypto/sha256"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// buildDeb builds a real .deb with dpkg-deb holding /usr/share/doc/NAME/hello.txt.
func buildDeb(t *testing.T, dir, name, version string) string {
	t.Helper()
	if _, err := exec.LookPath("dpkg-deb"); err != nil {
		t.Fatalf("dpkg-deb not found: run .ci/install-deps")
	}
	src := filepath.Join(t.TempDir(), name)
	mkdir(t, filepath.Join(src, "DEBIAN"))
	mkdir(t, filepath.Join(src, "usr/share/doc", name))
	writeFile(t, filepath.Join(src, "usr/share/doc", name, "hello.txt"), "hello from "+name+"\n")
	writeFile(t, filepath.Join(src, "DEBIAN/control"), fmt.Sprintf(
		"Package: %s\nVersion: %s\nArchitecture: amd64\nMaintainer: Test <test@example.org>\nDescription: test package %s\n", name, version, name))
	deb := filepath.Join(dir, fmt.Sprintf("%s_%s_amd64.deb", name, version))
	out, err := exec.Command("dpkg-deb", "--root-owner-group", "-Zgzip", "-b", src, deb).CombinedOutput()
	if err != nil {
		t.Fatalf("dpkg-deb: %v\n%s", err, out)
	}
	return deb
}

// writeRepo writes a small unsigned repository (suite "test", component "main") holding
// one real package, and returns its root.
func writeRepo(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	pool := filepath.Join(root, "pool/main/h/hello")
	mkdir(t, pool)
	deb := buildDeb(t, pool, "hello", "1.2-3")
	b, err := os.ReadFile(deb)
	if err != nil {
		t.Fatal(err)
	}
	rel, _ := filepath.Rel(root, deb)
	packages := fmt.Sprintf("Package: hello\nVersion: 1.2-3\nArchitecture: amd64\n"+
		"Maintainer: Test <test@example.org>\nFilename: %s\nSize: %d\nMD5sum: %x\nSHA256: %x\n"+
		"Description: test package hello\n\n", rel, len(b), md5.Sum(b), sha256.Sum256(b))
	var gz bytes.Buffer
	w := gzip.NewWriter(&gz)
	w.Write([]byte(packages))
	w.Close()

	dist := filepath.Join(root, "dists/test")
	mkdir(t, filepath.Join(dist, "main/binary-amd64"))
	files := map[string][]byte{"main/binary-amd64/Packages": []byte(packages), "main/binary-amd64/Packages.gz": gz.Bytes()}
	var release strings.Builder
	release.WriteString("Origin: apttest\nSuite: test\nCodename: test\nArchitectures: amd64\nComponents: main\n" +
		"Date: Thu, 01 Jan 2026 00:00:00 UTC\nSHA256:\n")
	for _, name := range []string{"main/binary-amd64/Packages", "main/binary-amd64/Packages.gz"} {
		fmt.Fprintf(&release, " %x %d %s\n", sha256.Sum256(files[name]), len(files[name]), name)
		writeFile(t, filepath.Join(dist, name), string(files[name]))
	}
	writeFile(t, filepath.Join(dist, "Release"), release.String())
	return root
}

// serve serves dir on 127.0.0.1 and returns its URL. Requests in proxy form
// (GET http://host/path) are served from dir too, so the server doubles as a proxy.
func serve(t *testing.T, dir string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.FileServer(http.Dir(dir))}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return "http://" + l.Addr().String()
}

func TestApt(t *testing.T) {
	url := serve(t, writeRepo(t))
	tests := []struct {
		name string
		o    Options
	}{
		{"direct", Options{Sources: []Source{{URI: url, Suites: []string{"test"}, Components: []string{"main"}}}}},
		{"through proxy", Options{
			Sources: []Source{{URI: "http://apt.example.test/", Suites: []string{"test"}, Components: []string{"main"}, Arch: "amd64"}},
			Proxy:   url,
		}},
		{"sources text", Options{SourcesText: "Types: deb\nURIs: " + url + "\nSuites: test\nComponents: main\nTrusted: yes\n"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := New(t, tc.o)
			out := a.Update(t)
			if !strings.Contains(out, "Packages") {
				t.Errorf("apt-get update fetched no Packages index:\n%s", out)
			}
			if got := a.Policy(t, "hello"); got != "1.2-3" {
				t.Errorf("candidate of hello: got %q, want 1.2-3", got)
			}
			if got := a.Policy(t, "absent"); got != "" {
				t.Errorf("candidate of an unknown package: got %q, want none", got)
			}
			if out := a.SimulateInstall(t, "hello"); !strings.Contains(out, "Inst hello (1.2-3") {
				t.Errorf("apt-get -s install hello does not install it:\n%s", out)
			}
			files := a.Download(t, "hello")
			if len(files) != 1 || filepath.Base(files[0]) != "hello_1.2-3_amd64.deb" {
				t.Errorf("downloaded %q, want hello_1.2-3_amd64.deb", files)
			}
			root := t.TempDir()
			a.Install(t, root, "hello")
			b, err := os.ReadFile(filepath.Join(root, "usr/share/doc/hello/hello.txt"))
			if err != nil || string(b) != "hello from hello\n" {
				t.Errorf("installed file: %q, %v", b, err)
			}
			lists, _ := filepath.Glob(filepath.Join(a.Root, "state/lists/*Packages*"))
			if len(lists) == 0 {
				t.Errorf("no Packages list under %s/state/lists", a.Root)
			}
		})
	}
}

// TestAptIsolated checks that apt's effective configuration names only the throwaway root,
// and that none of the host's apt.conf.d snippets (such as update hooks) is read.
func TestAptIsolated(t *testing.T) {
	a := New(t, Options{Sources: []Source{{URI: "http://127.0.0.1:9/", Suites: []string{"test"}, Components: []string{"main"}}}})
	out := runCmd(t, a.command("apt-config", "dump"))
	for _, bad := range []string{"/etc/apt", "/var/lib/apt", "/var/cache/apt", "/var/log/apt", "/var/lib/dpkg", "Invoke"} {
		for _, line := range strings.Split(out, "\n") {
			if strings.Contains(line, bad) {
				t.Errorf("apt-config dump shows %q: %s", bad, line)
			}
		}
	}
	for _, key := range []string{"Dir::State", "Dir::Cache", "Dir::Etc", "Dir::Log", "Dir::State::status"} {
		if !strings.Contains(out, key+" \""+a.Root) {
			t.Errorf("apt-config dump: %s is not under %s", key, a.Root)
		}
	}
}

func TestUpdateProblems(t *testing.T) {
	tests := []struct {
		name    string
		out     string
		trusted bool
		want    int
	}{
		{"clean", "Get:1 http://x test Release [1 kB]\nGet:2 http://x test/main amd64 Packages [2 kB]\nReading package lists...\n", false, 0},
		{"warning", "W: something\n", false, 1},
		{"error", "E: broken\nErr:1 http://x test Release\n", false, 2},
		{"ignored index", "Ign:2 http://x test/main amd64 Packages\n", true, 1},
		{"missing InRelease of a trusted source", "Ign:1 http://x test InRelease\n", true, 0},
		{"missing InRelease of a signed source", "Ign:1 http://x test InRelease\n", false, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := updateProblems(tc.out, tc.trusted); len(got) != tc.want {
				t.Errorf("got %d problems %q, want %d", len(got), got, tc.want)
			}
		})
	}
}
