package deb

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/armor-apt/armor/internal/testkit/synth"
)

const realDebDir = "../../testdata/debs"

// realDebs returns the paths of the real Debian packages under testdata/debs.
func realDebs(t testing.TB) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(realDebDir, "*.deb"))
	if err != nil || len(paths) < 3 {
		t.Fatalf("real test packages under %s: found %d, err %v", realDebDir, len(paths), err)
	}
	return paths
}

// needTool fails the test when a tool that .ci/install-deps installs is missing.
func needTool(t testing.TB, name string) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		t.Fatalf("%s is not installed: run .ci/install-deps", name)
	}
}

// encode builds a .deb from a raw control file with synth.Encode.
func encode(t testing.TB, control string, compression string) []byte {
	t.Helper()
	var b bytes.Buffer
	err := synth.Encode(&b, synth.Deb{
		Control:     []byte(control),
		Files:       []synth.File{{Path: "usr/share/doc/x/README", Data: []byte("hello\n")}},
		Compression: compression,
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// writeTemp writes data to a file in a fresh temporary directory.
func writeTemp(t testing.TB, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// arMember is one member for arArchive.
type arMember struct {
	name string
	data []byte
}

// arArchive assembles an ar archive from members, for malformed packages that
// synth.Encode will not build.
func arArchive(members ...arMember) []byte {
	var b bytes.Buffer
	b.WriteString("!<arch>\n")
	for _, m := range members {
		h := []byte(strings.Repeat(" ", 60))
		copy(h[0:], m.name)
		copy(h[16:], "0")
		copy(h[28:], "0")
		copy(h[34:], "0")
		copy(h[40:], "100644")
		copy(h[48:], strconv.Itoa(len(m.data)))
		copy(h[58:], "`\n")
		b.Write(h)
		b.Write(m.data)
		if len(m.data)%2 == 1 {
			b.WriteByte('\n')
		}
	}
	return b.Bytes()
}

// tarGz returns a gzip-compressed tar of the given regular files.
func tarGz(t testing.TB, files map[string]string) []byte {
	t.Helper()
	var b bytes.Buffer
	gz := gzip.NewWriter(&b)
	tw := tar.NewWriter(gz)
	for name, data := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(data)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

const goodControl = `Package: hello
Version: 2.10-3
Architecture: amd64
Maintainer: Test <t@example.invalid>
Description: greet
 The long part.
 .
 Second paragraph.
`
