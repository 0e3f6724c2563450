package index

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ulikunitz/xz"
)

// small cuts chunks of a few KiB, so that test indexes have many members and blocks.
var small = chunking{min: 1 << 10, avg: 4 << 10, max: 16 << 10}

// testName is the index name the tests build under unless they say otherwise.
const testName = "dists/test/main/binary-amd64/Packages"

// mustBuild builds stanzas under testName and checks the digests against the whole files.
func mustBuild(t testing.TB, stanzas [][]byte, c *Cache, ck chunking) *Files {
	t.Helper()
	f, err := build(stanzas, c, testName, ck, nil)
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	checkDigests(t, f)
	return f
}

func openCache(t testing.TB, dir string) *Cache {
	t.Helper()
	c, err := OpenCache(dir)
	if err != nil {
		t.Fatalf("open cache: %v", err)
	}
	return c
}

func needTool(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s not found: run .ci/install-deps", name)
	}
	return p
}

// run runs a command with stdin and returns its stdout, failing the test on error.
func run(t testing.TB, stdin []byte, name string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(needTool(t, name), args...)
	cmd.Stdin = bytes.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, errb.String())
	}
	return out.Bytes()
}

func gunzipGo(t testing.TB, b []byte) []byte {
	t.Helper()
	r, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("gzip reader: %v", err)
	}
	r.Multistream(true)
	out, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("gzip read: %v", err)
	}
	return out
}

func unxzGo(t testing.TB, b []byte) []byte {
	t.Helper()
	r, err := xz.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("xz reader: %v", err)
	}
	r.SingleStream = true // there must be exactly one stream
	out, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("xz read: %v", err)
	}
	return out
}

func sameBytes(t testing.TB, what string, got, want []byte) {
	t.Helper()
	if !bytes.Equal(got, want) {
		t.Errorf("%s: got %d bytes, want %d bytes (first difference at %d)", what, len(got), len(want), firstDiff(got, want))
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func TestBuildDecodes(t *testing.T) {
	tests := []struct {
		name    string
		stanzas [][]byte
		ck      chunking
	}{
		{"empty", nil, small},
		{"one", synthStanzas(1, 1), small},
		{"many small chunks", synthStanzas(300, 2), small},
		{"default chunks", synthStanzas(800, 3), defaultChunking},
		{"one stanza per chunk", synthStanzas(20, 4), chunking{min: 1, avg: 2, max: 3}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := mustBuild(t, tc.stanzas, nil, tc.ck)
			var want []byte
			for _, s := range tc.stanzas {
				want = append(append(want, s...), '\n')
			}
			sameBytes(t, "plain", f.Plain, want)
			sameBytes(t, "go gzip", gunzipGo(t, f.Gzip), want)
			sameBytes(t, "go xz", unxzGo(t, f.Xz), want)
			sameBytes(t, "gzip -dc", run(t, f.Gzip, "gzip", "-dc"), want)
			sameBytes(t, "zcat", run(t, f.Gzip, "zcat"), want)
			sameBytes(t, "xz -dc", run(t, f.Xz, "xz", "-dc"), want)
			run(t, f.Xz, "xz", "-t")
			run(t, f.Gzip, "gzip", "-t")

			dir := t.TempDir()
			gzPath, xzPath := filepath.Join(dir, "Packages.gz"), filepath.Join(dir, "Packages.xz")
			writeFile(t, gzPath, f.Gzip)
			writeFile(t, xzPath, f.Xz)
			// apt's own decompressors, as apt-get uses them on downloaded indexes.
			sameBytes(t, "apt-helper cat-file .gz", run(t, nil, aptHelper, "cat-file", gzPath), want)
			sameBytes(t, "apt-helper cat-file .xz", run(t, nil, aptHelper, "cat-file", xzPath), want)
			// One stream of one block, in which each chunk's LZMA2 data starts with a
			// state reset.
			streams, blocks := xzList(t, xzPath)
			chunks := len(tc.ck.cut(tc.stanzas, mustHashes(t, tc.stanzas)))
			if streams != 1 || blocks != min(chunks, 1) {
				t.Errorf("xz --list: %d streams, %d blocks; want 1 stream, %d blocks", streams, blocks, min(chunks, 1))
			}
			if chunks > 0 {
				if segs := xzSegmentsOf(t, f, tc.ck); len(segs)-1 != chunks {
					t.Errorf("%d state resets in the LZMA2 data, want one per chunk (%d)", len(segs)-1, chunks)
				}
			}
		})
	}
}

const aptHelper = "/usr/lib/apt/apt-helper"

func writeFile(t testing.TB, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func mustHashes(t testing.TB, stanzas [][]byte) []uint32 {
	t.Helper()
	h, err := hashStanzas(stanzas)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// xzList returns the numbers of streams and blocks `xz --robot --list` reports.
func xzList(t testing.TB, path string) (streams, blocks int) {
	t.Helper()
	out := run(t, nil, "xz", "--robot", "--list", path)
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Split(line, "\t")
		if f[0] == "file" && len(f) > 2 {
			streams, blocks = atoi(t, f[1]), atoi(t, f[2])
		}
	}
	return streams, blocks
}

func atoi(t testing.TB, s string) int {
	t.Helper()
	n := 0
	for _, c := range s {
		if c < '0' || c > '9' {
			t.Fatalf("not a number: %q", s)
		}
		n = n*10 + int(c-'0')
	}
	return n
}

func TestBuildRejectsMalformedStanza(t *testing.T) {
	tests := []struct {
		name   string
		stanza string
	}{
		{"empty", ""},
		{"no final newline", "Package: a"},
		{"blank line inside", "Package: a\n\nVersion: 1\n"},
		{"leading blank line", "\nPackage: a\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			stanzas := [][]byte{[]byte("Package: ok\n"), []byte(tc.stanza)}
			_, err := Build(stanzas, nil, testName)
			if !errors.Is(err, ErrStanza) {
				t.Fatalf("Build: got error %v, want %v", err, ErrStanza)
			}
		})
	}
}

func TestBuildDeterministic(t *testing.T) {
	stanzas := synthStanzas(400, 5)
	dir := t.TempDir()
	cold := mustBuild(t, stanzas, openCache(t, dir), small)
	warmCache := openCache(t, dir)
	warm := mustBuild(t, stanzas, warmCache, small)
	none := mustBuild(t, stanzas, nil, small)
	again := mustBuild(t, stanzas, nil, small)
	if s := warmCache.Stats(); s.Misses != 0 || s.Hits == 0 {
		t.Errorf("warm cache stats %+v: want hits only", s)
	}
	for _, f := range []struct {
		name string
		got  *Files
	}{{"warm cache", warm}, {"no cache", none}, {"second run", again}} {
		sameBytes(t, f.name+" plain", f.got.Plain, cold.Plain)
		sameBytes(t, f.name+" gzip", f.got.Gzip, cold.Gzip)
		sameBytes(t, f.name+" xz", f.got.Xz, cold.Xz)
	}
}

// TestEmptyIndexMatchesTools checks that the empty index's compressed forms are exactly what
// gzip -9n and xz write for empty input, as in archives made with those tools.
func TestEmptyIndexMatchesTools(t *testing.T) {
	f, err := Build(nil, nil, testName)
	if err != nil {
		t.Fatal(err)
	}
	checkDigests(t, f)
	if len(f.Plain) != 0 {
		t.Errorf("plain: got %q, want empty", f.Plain)
	}
	sameBytes(t, "gzip", f.Gzip, run(t, nil, "gzip", "-9n"))
	sameBytes(t, "xz", f.Xz, run(t, nil, "xz", "-c", "--check=crc32"))
}

// TestInsertRecompressesFewChunks checks that inserting or removing one stanza anywhere
// recompresses O(1) chunks: the changed chunk and at most the one after it.
func TestInsertRecompressesFewChunks(t *testing.T) {
	base := synthStanzas(600, 11)
	extra := synthStanzas(601, 12)[600]
	tests := []struct {
		name    string
		stanzas [][]byte
	}{
		{"insert first", insertAt(base, 0, extra)},
		{"insert middle", insertAt(base, 300, extra)},
		{"insert last", insertAt(base, len(base), extra)},
		{"remove middle", slices.Delete(slices.Clone(base), 277, 278)},
		{"replace middle", slices.Replace(slices.Clone(base), 450, 451, extra)},
	}
	baseDir := t.TempDir()
	mustBuild(t, base, openCache(t, baseDir), small)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.CopyFS(dir, os.DirFS(baseDir)); err != nil {
				t.Fatal(err)
			}
			c := openCache(t, dir)
			got := mustBuild(t, tc.stanzas, c, small)
			s := c.Stats()
			chunks := len(small.cut(tc.stanzas, mustHashes(t, tc.stanzas)))
			// Each chunk is two entries (gzip and xz).
			if s.Misses > 5 || s.Misses < 2 || s.Hits+s.Misses != int64(2*chunks) {
				t.Errorf("stats %+v over %d chunks: want 2 to 5 misses (changed gzip members; changed xz chunks and their successors), the rest hits", s, chunks)
			}
			want := mustBuild(t, tc.stanzas, nil, small)
			sameBytes(t, "gzip", got.Gzip, want.Gzip)
			sameBytes(t, "xz", got.Xz, want.Xz)
		})
	}
}

// FuzzBuild builds indexes of arbitrary stanzas (separated by NUL bytes in the input) and
// checks that Build either rejects a stanza or writes forms that decode to the plain index.
func FuzzBuild(f *testing.F) {
	f.Add([]byte("Package: a\nVersion: 1\n\x00Package: b\nVersion: 2\n"))
	f.Add([]byte("Package: a\n\nVersion: 1\n"))
	f.Add([]byte("\x00"))
	f.Add([]byte("x\n"))
	f.Add(bytes.Repeat([]byte("Package: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n\x00"), 40))
	tiny := chunking{min: 16, avg: 64, max: 256}
	f.Fuzz(func(t *testing.T, in []byte) {
		var stanzas [][]byte
		if len(in) > 0 {
			stanzas = bytes.Split(in, []byte{0})
		}
		got, err := build(stanzas, nil, "", tiny, nil)
		if err != nil {
			if !errors.Is(err, ErrStanza) {
				t.Fatalf("build: unexpected error %v", err)
			}
			return
		}
		var want []byte
		for _, s := range stanzas {
			want = append(append(want, s...), '\n')
		}
		sameBytes(t, "plain", got.Plain, want)
		sameBytes(t, "gzip", gunzipGo(t, got.Gzip), want)
		sameBytes(t, "xz", unxzGo(t, got.Xz), want)
		checkDigests(t, got)
	})
}

// TestBuildContiguousStanzas: stanzas that already lie one after the other in one array,
// each followed by a newline, give the same index as the same stanzas anywhere, and that
// array is the plain index, not a copy of it; stanzas that only nearly do are copied.
func TestBuildContiguousStanzas(t *testing.T) {
	stanzas := synthStanzas(500, 21)
	var plain []byte
	for _, st := range stanzas {
		plain = append(append(plain, st...), '\n')
	}
	laidOut := make([][]byte, len(stanzas))
	for i, off := 0, 0; i < len(stanzas); i++ {
		laidOut[i] = plain[off : off+len(stanzas[i])]
		off += len(stanzas[i]) + 1
	}
	want, err := Build(stanzas, nil, "x")
	if err != nil {
		t.Fatal(err)
	}
	got, err := Build(laidOut, nil, "x")
	if err != nil {
		t.Fatal(err)
	}
	if got.Digests != want.Digests || !bytes.Equal(got.Plain, want.Plain) || !bytes.Equal(got.Xz, want.Xz) || !bytes.Equal(got.Gzip, want.Gzip) {
		t.Fatalf("index of stanzas laid out in one array differs: %+v, want %+v", got.Digests, want.Digests)
	}
	if &got.Plain[0] != &plain[0] || len(got.Plain) != len(plain) {
		t.Errorf("the plain index is a copy, not the array the stanzas lie in")
	}
	// A separator that is not a newline: the stanzas are not the plain index.
	sep := len(laidOut[0])
	plain[sep] = 'X'
	got, err = Build(laidOut, nil, "x")
	if err != nil {
		t.Fatal(err)
	}
	if &got.Plain[0] == &plain[0] || got.Plain[sep] != '\n' {
		t.Errorf("stanzas not each followed by a newline were taken as the plain index")
	}
}
