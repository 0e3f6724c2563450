package synth

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/armor-apt/armor/debian/deb"
)

func needTool(t *testing.T, name string) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		t.Fatalf("%s is not installed: run .ci/install-deps", name)
	}
}

func TestWriteIsDeterministic(t *testing.T) {
	o := Options{N: 30, Seed: 42}
	a, err := Write(t.TempDir(), o)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Write(t.TempDir(), o)
	if err != nil {
		t.Fatal(err)
	}
	o.Seed = 43
	c, err := Write(t.TempDir(), o)
	if err != nil {
		t.Fatal(err)
	}
	differ := 0
	for i := range a {
		if filepath.Base(a[i]) != filepath.Base(b[i]) || filepath.Base(a[i]) != filepath.Base(c[i]) {
			t.Fatalf("file names differ: %s %s %s", a[i], b[i], c[i])
		}
		da, db, dc := read(t, a[i]), read(t, b[i]), read(t, c[i])
		if !bytes.Equal(da, db) {
			t.Errorf("%s differs between two runs with the same options", filepath.Base(a[i]))
		}
		if !bytes.Equal(da, dc) {
			differ++
		}
	}
	if differ != len(a) {
		t.Errorf("%d of %d packages are identical under another seed", len(a)-differ, len(a))
	}
}

func read(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestWriteOptions(t *testing.T) {
	tests := []struct {
		name     string
		o        Options
		wantArch []string // architecture of each package in order
		wantFile string   // base name of the first file
	}{
		{"defaults", Options{N: 10}, []string{"amd64", "amd64", "amd64", "amd64", "amd64", "amd64", "amd64", "amd64", "amd64", "all"}, "pkg000000_1.0-1_amd64.deb"},
		{"all every third", Options{N: 6, AllEvery: 3, Arch: "arm64"}, []string{"arm64", "arm64", "all", "arm64", "arm64", "all"}, "pkg000000_1.0-1_arm64.deb"},
		{"never all", Options{N: 3, AllEvery: -1}, []string{"amd64", "amd64", "amd64"}, "pkg000000_1.0-1_amd64.deb"},
		{"version with epoch", Options{N: 1, Version: "2:3.1-4"}, []string{"amd64"}, "pkg000000_3.1-4_amd64.deb"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			paths, err := Write(t.TempDir(), tt.o)
			if err != nil {
				t.Fatal(err)
			}
			if len(paths) != len(tt.wantArch) {
				t.Fatalf("wrote %d packages, want %d", len(paths), len(tt.wantArch))
			}
			if filepath.Base(paths[0]) != tt.wantFile {
				t.Errorf("first file is %s, want %s", filepath.Base(paths[0]), tt.wantFile)
			}
			for i, p := range paths {
				pkg, err := deb.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				if pkg.Architecture != tt.wantArch[i] || pkg.Name != Name(i) {
					t.Errorf("package %d is %s/%s, want %s/%s", i, pkg.Name, pkg.Architecture, Name(i), tt.wantArch[i])
				}
				if pkg.CanonicalFilename() != filepath.Base(p) {
					t.Errorf("file %s is not named canonically (%s)", filepath.Base(p), pkg.CanonicalFilename())
				}
			}
		})
	}
}

// TestWriteDependsOnLowerNumbers checks what lets apt install any package: each
// depends on at most two packages, all numbered below it.
func TestWriteDependsOnLowerNumbers(t *testing.T) {
	paths, err := Write(t.TempDir(), Options{N: 200, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	withDeps := 0
	for i, p := range paths {
		pkg, err := deb.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, field := range []string{"Maintainer", "Installed-Size", "Section", "Priority", "Description"} {
			if _, ok := pkg.Value(field); !ok {
				t.Errorf("%s has no %s field", pkg.Name, field)
			}
		}
		if d, _ := pkg.Value("Description"); !strings.Contains(d, "\n .\n") {
			t.Errorf("%s: Description has no long part with two paragraphs: %q", pkg.Name, d)
		}
		depends, ok := pkg.Value("Depends")
		if !ok {
			continue
		}
		withDeps++
		deps := strings.Split(depends, ", ")
		if len(deps) > 2 {
			t.Errorf("%s depends on %d packages", pkg.Name, len(deps))
		}
		for _, d := range deps {
			if d >= Name(i) || !strings.HasPrefix(d, "pkg") {
				t.Errorf("%s depends on %s, not a lower-numbered package", pkg.Name, d)
			}
		}
	}
	if withDeps < 50 || withDeps > 180 {
		t.Errorf("%d of 200 packages have dependencies; want a mix", withDeps)
	}
}

// TestDpkgDebAccepts has dpkg-deb inspect and unpack some generated packages.
func TestDpkgDebAccepts(t *testing.T) {
	needTool(t, "dpkg-deb")
	dir := t.TempDir()
	paths, err := Write(dir, Options{N: 12, Seed: 9})
	if err != nil {
		t.Fatal(err)
	}
	one, err := WriteOne(dir, "extra-tool", "1:2.0-1", "arm64", "pkg000001 (>= 1.0)")
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(one) != "extra-tool_2.0-1_arm64.deb" {
		t.Errorf("WriteOne wrote %s", one)
	}
	for _, p := range []string{paths[0], paths[5], paths[9], paths[11], one} {
		t.Run(filepath.Base(p), func(t *testing.T) {
			info, err := exec.Command("dpkg-deb", "--info", p).CombinedOutput()
			if err != nil {
				t.Fatalf("dpkg-deb --info: %v\n%s", err, info)
			}
			fields, err := exec.Command("dpkg-deb", "--field", p, "Package", "Version", "Architecture").Output()
			if err != nil {
				t.Fatalf("dpkg-deb --field: %v", err)
			}
			pkg, err := deb.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			want := "Package: " + pkg.Name + "\nVersion: " + pkg.Version + "\nArchitecture: " + pkg.Architecture + "\n"
			if string(fields) != want {
				t.Errorf("dpkg-deb --field gave\n%s\nwant\n%s", fields, want)
			}
			out := t.TempDir()
			if msg, err := exec.Command("dpkg-deb", "-x", p, out).CombinedOutput(); err != nil {
				t.Fatalf("dpkg-deb -x: %v\n%s", err, msg)
			}
			readme, err := os.Stat(filepath.Join(out, "usr/share/doc", pkg.Name, "README"))
			if err != nil {
				t.Fatal(err)
			}
			if readme.Size() < 2048 || readme.Size() >= 4096 {
				t.Errorf("payload is %d bytes, want 2-4 KiB", readme.Size())
			}
		})
	}
}

func TestWriteOneIsDeterministic(t *testing.T) {
	a, err := WriteOne(t.TempDir(), "hello", "2.10-3", "amd64", "")
	if err != nil {
		t.Fatal(err)
	}
	b, err := WriteOne(t.TempDir(), "hello", "2.10-3", "amd64", "")
	if err != nil {
		t.Fatal(err)
	}
	c, err := WriteOne(t.TempDir(), "hello", "2.10-4", "amd64", "")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(read(t, a), read(t, b)) {
		t.Error("WriteOne gave different bytes for the same package")
	}
	if bytes.Equal(read(t, a), read(t, c)) {
		t.Error("WriteOne gave the same bytes for another version")
	}
	pkg, err := deb.ReadFile(a)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := pkg.Value("Depends"); ok {
		t.Error("an empty depends argument wrote a Depends field")
	}
}
