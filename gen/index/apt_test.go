package index

import (
	"crypto/sha256"
	"fmt"
	"net"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/armor-apt/armor/internal/testkit/apttest"
)

// writeTree writes dists/test/main/binary-amd64/Packages{,.gz,.xz} and an unsigned Release
// listing all three (apt needs the uncompressed entry even when it fetches a compressed one).
func writeTree(t *testing.T, f *Files) string {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, "dists/test/main/binary-amd64")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var rel strings.Builder
	rel.WriteString("Origin: armor-test\nSuite: test\nCodename: test\nArchitectures: amd64\n" +
		"Components: main\nDate: Thu, 01 Jan 2026 00:00:00 UTC\nSHA256:\n")
	for _, v := range []struct {
		name string
		data []byte
	}{{"Packages", f.Plain}, {"Packages.gz", f.Gzip}, {"Packages.xz", f.Xz}} {
		if err := os.WriteFile(filepath.Join(dir, v.name), v.data, 0o644); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&rel, " %x %d main/binary-amd64/%s\n", sha256.Sum256(v.data), len(v.data), v.name)
	}
	if err := os.WriteFile(filepath.Join(root, "dists/test/Release"), []byte(rel.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return root
}

// server serves a directory on 127.0.0.1 and records the paths requested.
type server struct {
	URL  string
	mu   sync.Mutex
	seen []string
}

func serveTree(t *testing.T, dir string) *server {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &server{URL: "http://" + l.Addr().String()}
	files := http.FileServer(http.Dir(dir))
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.seen = append(s.seen, r.URL.Path)
		s.mu.Unlock()
		files.ServeHTTP(w, r)
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return s
}

// packagesFetched returns the base names of the Packages variants that were requested.
func (s *server) packagesFetched() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var got []string
	for _, p := range s.seen {
		if strings.HasPrefix(path.Base(p), "Packages") {
			got = append(got, path.Base(p))
		}
	}
	return got
}

// TestAptAcceptsIndex runs the real apt-get update against indexes of many gzip members and
// xz blocks, forcing each compression in turn, and checks that apt sees every package.
func TestAptAcceptsIndex(t *testing.T) {
	const n = 300
	full := synthStanzas(n, 7)
	var names []string
	for i := range n {
		names = append(names, synthName(i))
	}
	// apt decompresses while it downloads and stores the index plain (or, with
	// Acquire::GzipIndexes, recompressed as lz4), so the download is what reads our bytes.
	compressions := []struct{ name, file string }{
		{"xz", "Packages.xz"},
		{"gz", "Packages.gz"},
	}
	// apt does not download an index that Release lists with size 0: it creates the empty
	// file itself. The empty .gz and .xz are checked by apt's own decompressors in
	// TestBuildDecodes instead.
	indexes := []struct {
		name    string
		stanzas [][]byte
		names   []string
		fetched bool
	}{
		{"many chunks", full, names, true},
		{"empty", nil, nil, false},
	}
	for _, ix := range indexes {
		f := mustBuild(t, ix.stanzas, nil, small)
		if len(ix.stanzas) > 0 {
			if blocks := len(small.cut(ix.stanzas, mustHashes(t, ix.stanzas))); blocks < 20 {
				t.Fatalf("only %d chunks: the test must exercise many members and blocks", blocks)
			}
		}
		tree := writeTree(t, f)
		for _, comp := range compressions {
			t.Run(ix.name+"/"+comp.name, func(t *testing.T) {
				srv := serveTree(t, tree)
				a := apttest.New(t, apttest.Options{
					Sources: []apttest.Source{{URI: srv.URL, Suites: []string{"test"}, Components: []string{"main"}}},
					Extra:   []string{"Acquire::CompressionTypes::Order::=" + strings.TrimPrefix(path.Ext(comp.file), ".")},
				})
				a.Update(t)
				var want []string
				if ix.fetched {
					want = []string{comp.file}
				}
				if got := srv.packagesFetched(); !slices.Equal(got, want) {
					t.Errorf("apt fetched %q, want %q", got, want)
				}
				out, err := a.CacheCmd("pkgnames").Output()
				if err != nil {
					t.Fatalf("apt-cache pkgnames: %v", err)
				}
				got := strings.Fields(string(out))
				slices.Sort(got)
				if !slices.Equal(got, ix.names) {
					t.Errorf("apt-cache pkgnames: got %d names, want %d", len(got), len(ix.names))
				}
				for _, i := range []int{0, len(ix.names) / 2, len(ix.names) - 1} {
					if len(ix.names) == 0 {
						break
					}
					name := ix.names[i]
					want := field(ix.stanzas[i], "Version")
					if v := a.Policy(t, name); v != want {
						t.Errorf("candidate of %s: got %q, want %q", name, v, want)
					}
					show, err := a.CacheCmd("show", name).Output()
					if err != nil || !strings.Contains(string(show), "SHA256: "+field(ix.stanzas[i], "SHA256")) {
						t.Errorf("apt-cache show %s: %v\n%s", name, err, show)
					}
				}
			})
		}
	}
}

// field returns the value of a single-line field of a stanza.
func field(stanza []byte, name string) string {
	for _, line := range strings.Split(string(stanza), "\n") {
		if v, ok := strings.CutPrefix(line, name+": "); ok {
			return v
		}
	}
	return ""
}
