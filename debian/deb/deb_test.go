package deb

import (
	"bytes"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/armor-apt/armor/internal/testkit/synth"
)

func TestReadFileRealPackages(t *testing.T) {
	// Identity of each fixture, from testdata/debs/PROVENANCE.md.
	want := map[string]struct {
		name, version, arch, source, sourceVersion, sha256 string
		size                                               int64
	}{
		"libnatpmp1_20150609-7.1+b2_amd64.deb": {"libnatpmp1", "20150609-7.1+b2", "amd64", "libnatpmp", "20150609-7.1",
			"c71411a42c915e9a747afe09c898137d3c02f68b1886fce90ecd61d093973383", 8404},
		"libnatpmp-dev_20150609-7.1+b2_amd64.deb": {"libnatpmp-dev", "20150609-7.1+b2", "amd64", "libnatpmp", "20150609-7.1",
			"36fcf510757c019fe00eb5fef6a6f932b2f4960ca32b282ba2ff60af21eab9b9", 6932},
		"natpmpc_20150609-7.1+b2_amd64.deb": {"natpmpc", "20150609-7.1+b2", "amd64", "libnatpmp", "20150609-7.1",
			"46923fa61e1bff9bc3136177ad172227b4babfa22e9516a23d2fac5955fd91ee", 8600},
		"natpmp-utils_20150609-7.1_all.deb": {"natpmp-utils", "20150609-7.1", "all", "libnatpmp", "20150609-7.1",
			"61f5468321715586d7bd0a0cdb947d5905aad5adb04c9ffe62f2879198b06393", 5152},
	}
	needTool(t, "dpkg-deb")
	paths := realDebs(t)
	if len(paths) != len(want) {
		t.Fatalf("found %d packages in %s, want %d", len(paths), realDebDir, len(want))
	}
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			w, ok := want[filepath.Base(path)]
			if !ok {
				t.Fatalf("unexpected fixture %s", path)
			}
			p, err := ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			got := [...]string{p.Name, p.Version, p.Architecture, p.Source, p.SourceVersion, p.SHA256}
			exp := [...]string{w.name, w.version, w.arch, w.source, w.sourceVersion, w.sha256}
			if got != exp {
				t.Errorf("identity\n got %q\nwant %q", got, exp)
			}
			if p.Size != w.size {
				t.Errorf("Size = %d, want %d", p.Size, w.size)
			}
			if p.CanonicalFilename() != filepath.Base(path) {
				t.Errorf("CanonicalFilename() = %q, want %q", p.CanonicalFilename(), filepath.Base(path))
			}

			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			m, s1, s256 := md5.Sum(data), sha1.Sum(data), sha256.Sum256(data)
			if p.MD5 != hex.EncodeToString(m[:]) || p.SHA1 != hex.EncodeToString(s1[:]) || p.SHA256 != hex.EncodeToString(s256[:]) {
				t.Errorf("digests %s %s %s, want %x %x %x", p.MD5, p.SHA1, p.SHA256, m, s1, s256)
			}

			// The fields, rendered back, must be the control file byte for
			// byte: same order, same continuation lines.
			control, err := exec.Command("dpkg-deb", "--info", path, "control").Output()
			if err != nil {
				t.Fatalf("dpkg-deb --info %s control: %v", path, err)
			}
			var b bytes.Buffer
			for _, f := range p.Fields {
				writeField(&b, f.Name, f.Value)
			}
			if b.String() != string(control) {
				t.Errorf("fields rendered back differ from dpkg-deb's control file\n got:\n%s\nwant:\n%s", b.String(), control)
			}
		})
	}
}

func TestReadControlCompressions(t *testing.T) {
	for _, c := range []string{"gz", "xz", "zst", "none"} {
		t.Run(c, func(t *testing.T) {
			data := encode(t, goodControl, c)
			p, err := Read(bytes.NewReader(data), "hello.deb", int64(len(data)))
			if err != nil {
				t.Fatal(err)
			}
			if p.Name != "hello" || p.Version != "2.10-3" || p.Architecture != "amd64" || len(p.Fields) != 5 {
				t.Errorf("got %s %s %s with %d fields, want hello 2.10-3 amd64 with 5", p.Name, p.Version, p.Architecture, len(p.Fields))
			}
			if want := sha256.Sum256(data); p.SHA256 != hex.EncodeToString(want[:]) {
				t.Errorf("SHA256 = %s, want %x", p.SHA256, want)
			}
		})
	}
}

func TestReadUnknownSize(t *testing.T) {
	data := encode(t, goodControl, "gz")
	p, err := Read(bytes.NewReader(data), "hello.deb", -1)
	if err != nil {
		t.Fatal(err)
	}
	if p.Size != int64(len(data)) {
		t.Errorf("Size = %d, want %d", p.Size, len(data))
	}
}

func TestReadErrors(t *testing.T) {
	good := encode(t, goodControl, "gz")
	withControl := func(control string) []byte { return encode(t, control, "gz") }
	without := func(field string) []byte {
		var lines []string
		for _, l := range strings.SplitAfter(goodControl, "\n") {
			if !strings.HasPrefix(l, field+":") {
				lines = append(lines, l)
			}
		}
		return withControl(strings.Join(lines, ""))
	}
	replace := func(old, new string) []byte { return withControl(strings.Replace(goodControl, old, new, 1)) }
	ctlTar := tarGz(t, map[string]string{"./control": goodControl})
	dataTar := tarGz(t, map[string]string{"./usr/x": "x"})

	tests := []struct {
		name     string
		data     []byte
		size     int64 // announced size; -2 means len(data)
		is       []error
		field    string   // the FieldError's field, if one is expected
		contains []string // the message must contain these, besides the file name
	}{
		{name: "empty file", data: nil, is: []error{ErrNotDeb}, contains: []string{"too short"}},
		{name: "text file", data: []byte("Package: hello\nVersion: 1\n"), is: []error{ErrNotDeb}, contains: []string{"ar archive"}},
		{name: "truncated in the middle", data: good[:len(good)/2], is: []error{ErrTruncated, ErrNotDeb}, contains: []string{"truncated"}},
		{name: "truncated by one byte", data: good[:len(good)-1], is: []error{ErrTruncated, ErrNotDeb}, contains: []string{"truncated", "data.tar.gz"}},
		{name: "truncated in a member header", data: good[:8+30], is: []error{ErrTruncated}, contains: []string{"header"}},
		{name: "truncated in control.tar", data: good[:8+60+4+60+20], is: []error{ErrTruncated}, contains: []string{"control.tar.gz"}},
		{name: "shorter than announced", data: good, size: int64(len(good)) + 10, is: []error{ErrTruncated}, contains: []string{"truncated"}},
		{name: "longer than announced", data: good, size: int64(len(good)) - 2, contains: []string{"expected"}},
		{name: "missing Package", data: without("Package"), is: []error{ErrMissingField}, field: "Package"},
		{name: "missing Version", data: without("Version"), is: []error{ErrMissingField}, field: "Version"},
		{name: "missing Architecture", data: without("Architecture"), is: []error{ErrMissingField}, field: "Architecture"},
		{name: "invalid version", data: replace("Version: 2.10-3", "Version: a b"), field: "Version", contains: []string{`invalid version "a b"`}},
		{name: "version not starting with a digit", data: replace("Version: 2.10-3", "Version: x1"), field: "Version", contains: []string{`"x1"`}},
		{name: "empty revision", data: replace("Version: 2.10-3", "Version: 2.10-"), field: "Version", contains: []string{"revision"}},
		{name: "empty upstream", data: replace("Version: 2.10-3", "Version: 1:-3"), field: "Version", contains: []string{"upstream"}},
		{name: "empty version", data: replace("Version: 2.10-3", "Version:"), field: "Version"},
		{name: "uppercase package name", data: replace("Package: hello", "Package: Hello"), field: "Package", contains: []string{`"Hello"`}},
		{name: "one-letter package name", data: replace("Package: hello", "Package: h"), field: "Package"},
		{name: "underscore in package name", data: replace("Package: hello", "Package: hel_lo"), field: "Package"},
		{name: "wildcard architecture", data: replace("Architecture: amd64", "Architecture: any"), field: "Architecture"},
		{name: "two architectures", data: replace("Architecture: amd64", "Architecture: amd64 i386"), field: "Architecture"},
		{name: "bad source version", data: replace("Package: hello", "Package: hello\nSource: hi (a b)"), field: "Source", contains: []string{"a b"}},
		{name: "bad source name", data: replace("Package: hello", "Package: hello\nSource: Hi"), field: "Source"},
		{name: "unclosed source version", data: replace("Package: hello", "Package: hello\nSource: hi (1.0"), field: "Source"},
		{name: "latin-1 description", data: replace("Package: hello", "Package: hello\nHomepage: Ren\xe9 <r@example.org>"), is: []error{ErrNotUTF8}, field: "Homepage", contains: []string{"byte 0xe9 at offset 3"}},
		{name: "duplicate field", data: replace("Package: hello", "Package: hello\npackage: hello"), is: []error{ErrNotDeb}, contains: []string{"twice"}},
		{name: "continuation first", data: withControl(" Package: hello\n"), is: []error{ErrNotDeb}, contains: []string{"continuation"}},
		{name: "line without colon", data: replace("Package: hello", "Package: hello\nnonsense"), is: []error{ErrNotDeb}, contains: []string{"line 2"}},
		{name: "two paragraphs", data: withControl(goodControl + "\nPackage: again\n"), is: []error{ErrNotDeb}, contains: []string{"paragraph"}},
		{name: "empty control file", data: withControl("\n\n"), is: []error{ErrNotDeb}, contains: []string{"no fields"}},
		{name: "not debian-binary first", data: arArchive(arMember{"control.tar.gz", ctlTar}, arMember{"debian-binary", []byte("2.0\n")}), is: []error{ErrNotDeb}, contains: []string{"debian-binary"}},
		{name: "format version 3", data: arArchive(arMember{"debian-binary", []byte("3.0\n")}, arMember{"control.tar.gz", ctlTar}, arMember{"data.tar.gz", dataTar}), is: []error{ErrNotDeb}, contains: []string{"3.0"}},
		{name: "no control member", data: arArchive(arMember{"debian-binary", []byte("2.0\n")}, arMember{"data.tar.gz", dataTar}), is: []error{ErrNotDeb}, contains: []string{"control.tar"}},
		{name: "no data member", data: arArchive(arMember{"debian-binary", []byte("2.0\n")}, arMember{"control.tar.gz", ctlTar}), is: []error{ErrNotDeb}, contains: []string{"data.tar"}},
		{name: "unknown member", data: arArchive(arMember{"debian-binary", []byte("2.0\n")}, arMember{"control.tar.gz", ctlTar}, arMember{"extra", nil}, arMember{"data.tar.gz", dataTar}), is: []error{ErrNotDeb}, contains: []string{`"extra"`}},
		{name: "unsupported control compression", data: arArchive(arMember{"debian-binary", []byte("2.0\n")}, arMember{"control.tar.bz2", ctlTar}, arMember{"data.tar.gz", dataTar}), is: []error{ErrNotDeb}, contains: []string{"control.tar.bz2"}},
		{name: "control.tar without control", data: arArchive(arMember{"debian-binary", []byte("2.0\n")}, arMember{"control.tar.gz", tarGz(t, map[string]string{"./postinst": "#!/bin/sh\n"})}, arMember{"data.tar.gz", dataTar}), is: []error{ErrNotDeb}, contains: []string{"no control file"}},
		{name: "control.tar not gzip", data: arArchive(arMember{"debian-binary", []byte("2.0\n")}, arMember{"control.tar.gz", []byte("plain text")}, arMember{"data.tar.gz", dataTar}), is: []error{ErrNotDeb}, contains: []string{"control.tar.gz"}},
		{name: "bad member header", data: append([]byte("!<arch>\n"), bytes.Repeat([]byte("x"), 60)...), is: []error{ErrNotDeb}, contains: []string{"malformed"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			size := tt.size
			if size == 0 {
				size = int64(len(tt.data))
			}
			const name = "testpkg_1.0_amd64.deb"
			p, err := Read(bytes.NewReader(tt.data), name, size)
			if err == nil {
				t.Fatalf("Read succeeded with %s %s, want an error", p.Name, p.Version)
			}
			msg := err.Error()
			t.Log(msg)
			if !strings.HasPrefix(msg, name+": ") {
				t.Errorf("error %q does not start with the file name", msg)
			}
			for _, target := range tt.is {
				if !errors.Is(err, target) {
					t.Errorf("error %q is not %q", msg, target)
				}
			}
			if tt.field != "" {
				var fe *FieldError
				if !errors.As(err, &fe) || fe.Field != tt.field || fe.Path != name {
					t.Errorf("error %q is not a FieldError for %s in %s", msg, tt.field, name)
				}
				if !strings.Contains(msg, "field "+tt.field+": ") {
					t.Errorf("error %q does not name field %s", msg, tt.field)
				}
			}
			for _, s := range tt.contains {
				if !strings.Contains(msg, s) {
					t.Errorf("error %q does not contain %q", msg, s)
				}
			}
		})
	}
}

func TestReadFileErrors(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.deb")
	text := writeTemp(t, "notes.deb", []byte("not a package\n"))
	tests := []struct {
		name, path string
		is         error
	}{
		{"nonexistent", missing, fs.ErrNotExist},
		{"directory", dir, ErrNotDeb},
		{"text file", text, ErrNotDeb},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ReadFile(tt.path)
			if !errors.Is(err, tt.is) {
				t.Fatalf("ReadFile(%s) = %v, want an error that is %v", tt.path, err, tt.is)
			}
			if !strings.Contains(err.Error(), tt.path) {
				t.Errorf("error %q does not name %s", err, tt.path)
			}
		})
	}
}

func TestSource(t *testing.T) {
	tests := []struct {
		name, source          string // empty source: no Source field
		wantName, wantVersion string
	}{
		{"absent", "", "hello", "2.10-3"},
		{"name only", "hello-src", "hello-src", "2.10-3"},
		{"with version", "hello-src (2.10-2)", "hello-src", "2.10-2"},
		{"with epoch", "hello-src (1:2.10-2)", "hello-src", "1:2.10-2"},
		{"tight parenthesis", "hello-src(2.10-2)", "hello-src", "2.10-2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			control := goodControl
			if tt.source != "" {
				control = strings.Replace(control, "Version:", "Source: "+tt.source+"\nVersion:", 1)
			}
			data := encode(t, control, "gz")
			p, err := Read(bytes.NewReader(data), "hello.deb", -1)
			if err != nil {
				t.Fatal(err)
			}
			if p.Source != tt.wantName || p.SourceVersion != tt.wantVersion {
				t.Errorf("Source, SourceVersion = %q, %q, want %q, %q", p.Source, p.SourceVersion, tt.wantName, tt.wantVersion)
			}
		})
	}
}

func TestCanonicalFilename(t *testing.T) {
	tests := []struct {
		name, pkg, version, arch, want string
	}{
		{"plain", "hello", "2.10-3", "amd64", "hello_2.10-3_amd64.deb"},
		{"epoch dropped", "hello", "1:2.10-3", "amd64", "hello_2.10-3_amd64.deb"},
		{"colon after epoch kept", "hello", "1:2.10:rc1-3", "all", "hello_2.10:rc1-3_all.deb"},
		{"native", "base-files", "12.4+deb12u5", "arm64", "base-files_12.4+deb12u5_arm64.deb"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &Package{Name: tt.pkg, Version: tt.version, Architecture: tt.arch}
			if got := p.CanonicalFilename(); got != tt.want {
				t.Errorf("CanonicalFilename() = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestReadLargeDigests covers packages big enough for MD5 to be computed on a
// goroutine of its own.
func TestReadLargeDigests(t *testing.T) {
	payload := bytes.Repeat([]byte("0123456789abcdef"), 3<<16) // 3 MiB
	var b bytes.Buffer
	if err := synth.Encode(&b, synth.Deb{
		Control:   []byte(goodControl),
		Files:     []synth.File{{Path: "usr/share/big", Data: payload}},
		StoreData: true,
	}); err != nil {
		t.Fatal(err)
	}
	path := writeTemp(t, "big.deb", b.Bytes())
	p, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data := b.Bytes()
	m, s1, s256 := md5.Sum(data), sha1.Sum(data), sha256.Sum256(data)
	if p.Size != int64(len(data)) || p.MD5 != hex.EncodeToString(m[:]) || p.SHA1 != hex.EncodeToString(s1[:]) || p.SHA256 != hex.EncodeToString(s256[:]) {
		t.Errorf("size %d digests %s %s %s, want %d %x %x %x", p.Size, p.MD5, p.SHA1, p.SHA256, len(data), m, s1, s256)
	}
}
