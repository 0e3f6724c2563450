package deb

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"pault.ag/go/debian/control"
)

// BuildSource makes a real source package hello_1.0-1 (3.0 (quilt)) with dpkg-source in
// dir and returns the .dsc's path.
func buildSource(t testing.TB, dir string) string {
	t.Helper()
	needTool(t, "dpkg-source")
	src := filepath.Join(dir, "hello-1.0")
	files := map[string]string{
		"README": "hi\n",
		"debian/control": "Source: hello\nSection: devel\nPriority: optional\nMaintainer: Test <t@example.org>\n" +
			"Build-Depends: debhelper-compat (= 13)\nStandards-Version: 4.6.2\n\nPackage: hello\nArchitecture: any\nDescription: test\n test package\n",
		"debian/changelog":     "hello (1.0-1) unstable; urgency=medium\n\n  * x\n\n -- Test <t@example.org>  Mon, 01 Jan 2024 00:00:00 +0000\n",
		"debian/source/format": "3.0 (quilt)\n",
	}
	for name, content := range files {
		p := filepath.Join(src, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{
		{"tar", "--exclude=debian", "--mtime=2024-01-01", "--sort=name", "--owner=0", "--group=0", "-czf", "hello_1.0.orig.tar.gz", "hello-1.0"},
		{"dpkg-source", "-b", "hello-1.0"},
	} {
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	return filepath.Join(dir, "hello_1.0-1.dsc")
}

func TestReadDscFile(t *testing.T) {
	dir := t.TempDir()
	dsc := buildSource(t, dir)
	s, err := ReadDscFile(dsc)
	if err != nil {
		t.Fatal(err)
	}
	if s.Name != "hello" || s.Version != "1.0-1" || len(s.Parts) != 2 {
		t.Fatalf("got %s %s with %d parts, want hello 1.0-1 with 2", s.Name, s.Version, len(s.Parts))
	}
	st := string(s.Stanza("pool/main/h/hello"))
	// apt reads the stanza back as a deb822 paragraph: the fields it needs must be there.
	para, err := control.NewParagraphReader(strings.NewReader(st), nil)
	if err != nil {
		t.Fatal(err)
	}
	var idx control.SourceIndex
	p, err := para.Next()
	if err != nil {
		t.Fatal(err)
	}
	if err := control.UnpackFromParagraph(*p, &idx); err != nil {
		t.Fatalf("unpack stanza: %v\n%s", err, st)
	}
	if idx.Package != "hello" || idx.Directory != "pool/main/h/hello" || len(idx.ChecksumsSha256) != 3 || idx.ChecksumsSha256[0].Filename != "hello_1.0-1.dsc" || idx.ChecksumsSha256[0].Hash != s.SHA256 {
		t.Errorf("stanza:\n%s", st)
	}
	for _, want := range []string{"Package: hello\n", "Package-List:\n hello deb devel optional arch=any\n", "Format: 3.0 (quilt)\n", "\nDirectory: pool/main/h/hello\nPriority: optional\nSection: devel\n"} {
		if !strings.Contains(st, want) {
			t.Errorf("stanza lacks %q:\n%s", want, st)
		}
	}
	if strings.Contains(st, "Source:") {
		t.Errorf("stanza keeps the Source field:\n%s", st)
	}

	// A tarball that does not match the .dsc is refused, naming both.
	orig := filepath.Join(dir, "hello_1.0.orig.tar.gz")
	data, _ := os.ReadFile(orig)
	data[len(data)-1] ^= 1
	os.WriteFile(orig, data, 0o644)
	if _, err := ReadDscFile(dsc); !errors.Is(err, ErrSourceFile) || !strings.Contains(err.Error(), "hello_1.0.orig.tar.gz") || !strings.Contains(err.Error(), dsc) {
		t.Errorf("damaged tarball: %v", err)
	}
	os.Remove(orig)
	if _, err := ReadDscFile(dsc); !errors.Is(err, ErrSourceFile) {
		t.Errorf("missing tarball: %v", err)
	}
}

func TestParseDscRejects(t *testing.T) {
	good := "Format: 3.0 (quilt)\nSource: hello\nVersion: 1.0-1\nChecksums-Sha256:\n " + strings.Repeat("a", 64) + " 3 x.tar.gz\nFiles:\n " + strings.Repeat("b", 32) + " 3 x.tar.gz\n"
	for name, c := range map[string]struct{ in, want string }{
		"no source":       {strings.Replace(good, "Source: hello\n", "", 1), "field Source"},
		"bad version":     {strings.Replace(good, "1.0-1", "1.0-", 1), "field Version"},
		"no sha256":       {good[:strings.Index(good, "Checksums")] + good[strings.Index(good, "Files"):], "field Checksums-Sha256"},
		"path in files":   {strings.ReplaceAll(good, "x.tar.gz", "../x.tar.gz"), "field Files"},
		"size mismatch":   {strings.Replace(good, " 3 x.tar.gz\nFiles", " 4 x.tar.gz\nFiles", 1), "field Checksums-Sha256"},
		"not in files":    {strings.Replace(good, " 3 x.tar.gz\nFiles", " 3 y.tar.gz\nFiles", 1), "field Checksums-Sha256"},
		"no format":       {strings.Replace(good, "Format: 3.0 (quilt)\n", "", 1), "field Format"},
		"not a paragraph": {"garbage\n", "not a Debian source control file"},
		"latin-1":         {strings.Replace(good, "Source: hello\n", "Source: hello\nMaintainer: Ren\xe9\n", 1), "field Maintainer: not valid UTF-8"},
	} {
		if _, err := ParseDsc([]byte(c.in), "x.dsc"); err == nil || !strings.HasPrefix(err.Error(), "x.dsc") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error naming x.dsc and %q", name, err, c.want)
		}
	}
	if _, err := ParseDsc([]byte(good), "x.dsc"); err != nil {
		t.Errorf("good: %v", err)
	}
}

// FuzzParseDsc feeds arbitrary bytes to ParseDsc: no panic, an error naming the input, or
// a source whose stanza parses back as one paragraph with its name and the .dsc listed.
func FuzzParseDsc(f *testing.F) {
	f.Add([]byte("Format: 3.0 (quilt)\nSource: hello\nVersion: 1.0-1\nChecksums-Sha256:\n " + strings.Repeat("a", 64) + " 3 x.tar.gz\nFiles:\n " + strings.Repeat("b", 32) + " 3 x.tar.gz\nPackage-List:\n hello deb devel optional\n .\n"))
	f.Add([]byte("-----BEGIN PGP SIGNED MESSAGE-----\nHash: SHA256\n\nSource: a\n-----BEGIN PGP SIGNATURE-----\n\n-----END PGP SIGNATURE-----\n"))
	f.Add([]byte("Source: a\nSource: b\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseDsc(data, "fuzz.dsc")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz.dsc") {
				t.Fatalf("error %q does not name the input", err)
			}
			return
		}
		st := s.Stanza("pool/main/x/" + s.Name)
		if bytes.Contains(st, []byte("\n\n")) || !bytes.HasSuffix(st, []byte("\n")) {
			t.Fatalf("stanza is not one paragraph:\n%q", st)
		}
		r, err := control.NewParagraphReader(bytes.NewReader(st), nil)
		if err != nil {
			t.Fatal(err)
		}
		all, err := r.All()
		if err != nil || len(all) != 1 {
			t.Fatalf("stanza reads as %d paragraphs (%v):\n%s", len(all), err, st)
		}
		if all[0].Values["Package"] != s.Name || !strings.Contains(all[0].Values["Checksums-Sha256"], s.SHA256+" ") {
			t.Fatalf("stanza lost the name or the .dsc's checksum:\n%s", st)
		}
	})
}
