package deb

import (
	"archive/tar"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// dpkgFiles lists what dpkg-deb says a package installs, as Contents lists it: every
// entry of its filesystem tar but directories, without "./".
func dpkgFiles(t *testing.T, deb string) []string {
	t.Helper()
	fsys, err := exec.Command("dpkg-deb", "--fsys-tarfile", deb).Output()
	if err != nil {
		t.Fatalf("dpkg-deb --fsys-tarfile %s: %v", deb, err)
	}
	cmd := exec.Command("tar", "-t")
	cmd.Stdin = bytes.NewReader(fsys)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("tar -t of %s: %v", deb, err)
	}
	var files []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if strings.HasSuffix(l, "/") {
			continue
		}
		files = append(files, strings.TrimPrefix(l, "./"))
	}
	slices.Sort(files)
	return files
}

// TestReadFilesRealPackages: the files read from real packages (data.tar.xz, with
// symbolic links) are those dpkg-deb and tar list.
func TestReadFilesRealPackages(t *testing.T) {
	needTool(t, "dpkg-deb")
	needTool(t, "tar")
	for _, path := range realDebs(t) {
		t.Run(filepath.Base(path), func(t *testing.T) {
			p, err := ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			want := dpkgFiles(t, path)
			if len(want) == 0 {
				t.Fatalf("dpkg-deb lists no files in %s", path)
			}
			if !slices.Equal(p.Files, want) {
				t.Errorf("Files\n got %q\nwant %q", p.Files, want)
			}
		})
	}
}

// TestReadFilesCompressions: data.tar is read in every compression dpkg-deb writes, and
// the names are cleaned as Contents lists them.
func TestReadFilesCompressions(t *testing.T) {
	needTool(t, "dpkg-deb")
	for _, c := range []string{"gzip", "xz", "zstd", "none"} {
		t.Run(c, func(t *testing.T) {
			root := t.TempDir()
			for _, f := range []string{"DEBIAN/control", "usr/bin/hello", "usr/share/doc/hello/copyright", "usr/share/a b/with space"} {
				data := "x\n"
				if f == "DEBIAN/control" {
					data = goodControl
				}
				if err := os.MkdirAll(filepath.Join(root, filepath.Dir(f)), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(root, f), []byte(data), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.Symlink("hello", filepath.Join(root, "usr/bin/hi")); err != nil {
				t.Fatal(err)
			}
			deb := filepath.Join(t.TempDir(), "hello.deb")
			if out, err := exec.Command("dpkg-deb", "--root-owner-group", "-Z"+c, "--build", root, deb).CombinedOutput(); err != nil {
				t.Fatalf("dpkg-deb --build: %v\n%s", err, out)
			}
			p, err := ReadFile(deb)
			if err != nil {
				t.Fatal(err)
			}
			want := []string{"usr/bin/hello", "usr/bin/hi", "usr/share/a b/with space", "usr/share/doc/hello/copyright"}
			if !slices.Equal(p.Files, want) {
				t.Errorf("Files\n got %q\nwant %q", p.Files, want)
			}
			if d := dpkgFiles(t, deb); !slices.Equal(d, want) {
				t.Errorf("dpkg-deb lists %q, want %q", d, want)
			}
		})
	}
}

// TestReadFilesNames: tar entry names are cleaned and listed once; the root and names
// with line breaks are left out; a data.tar that is not a tar is an error naming it.
func TestReadFilesNames(t *testing.T) {
	var data bytes.Buffer
	tw := tar.NewWriter(&data)
	for _, h := range []tar.Header{
		{Name: "./", Typeflag: tar.TypeDir},
		{Name: "./usr/", Typeflag: tar.TypeDir},
		{Name: "./usr/bin/b", Typeflag: tar.TypeReg},
		{Name: "/usr/bin/a", Typeflag: tar.TypeReg},
		{Name: "usr//bin/./a", Typeflag: tar.TypeReg},
		{Name: "./usr/../etc/x", Typeflag: tar.TypeSymlink, Linkname: "y"},
		{Name: "./usr/bin/c", Typeflag: tar.TypeLink, Linkname: "./usr/bin/b"},
		{Name: "./bad\nname", Typeflag: tar.TypeReg},
		{Name: ".", Typeflag: tar.TypeReg},
	} {
		h.Mode = 0o644
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	ctl := tarGz(t, map[string]string{"./control": goodControl})
	deb := arArchive(arMember{"debian-binary", []byte("2.0\n")}, arMember{"control.tar.gz", ctl}, arMember{"data.tar", data.Bytes()})
	p, err := Read(bytes.NewReader(deb), "names.deb", int64(len(deb)))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"etc/x", "usr/bin/a", "usr/bin/b", "usr/bin/c"}; !slices.Equal(p.Files, want) {
		t.Errorf("Files\n got %q\nwant %q", p.Files, want)
	}

	bad := arArchive(arMember{"debian-binary", []byte("2.0\n")}, arMember{"control.tar.gz", ctl}, arMember{"data.tar.gz", []byte("not gzip")})
	_, err = Read(bytes.NewReader(bad), "bad.deb", int64(len(bad)))
	if err == nil || !strings.Contains(err.Error(), "bad.deb") || !strings.Contains(err.Error(), "data.tar.gz") {
		t.Errorf("bad data.tar: error %v, want one naming bad.deb and data.tar.gz", err)
	}
	odd := arArchive(arMember{"debian-binary", []byte("2.0\n")}, arMember{"control.tar.gz", ctl}, arMember{"data.tar.lz4", nil})
	if _, err = Read(bytes.NewReader(odd), "odd.deb", int64(len(odd))); err == nil || !strings.Contains(err.Error(), "data.tar.lz4") {
		t.Errorf("unknown data.tar compression: error %v, want one naming data.tar.lz4", err)
	}
}
