package deb

import (
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"pault.ag/go/debian/control"

	"github.com/armor-apt/armor/manifest"
)

const (
	sumA = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	sumB = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	sumC = "cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc"
)

var goodPackages = "Package: hello\nVersion: 1:2.10-3\nArchitecture: amd64\nDescription: greet\n the world\n .\n again\n" +
	"Filename: pool/main/h/hello/hello_2.10-3_amd64.deb\nSize: 1234\nMD5sum: 0123\nSHA256: " + sumA + "\n\n" +
	"package: tzdata\nversion: 2024a\narchitecture: all\nfilename: pool/main/t/tzdata/tzdata_2024a_all.deb\nsize: 9\n" +
	"sha256: " + sumB + "\nPhased-Update-Percentage: 10\n\n"

var goodSources = "Package: hello\nBinary: hello\nVersion: 2.10-3\nArchitecture: any\nDirectory: pool/main/h/hello\n" +
	"Files:\n 0123 1 hello_2.10-3.dsc\nChecksums-Sha256:\n " + sumA + " 1000 hello_2.10-3.dsc\n " + sumB + " 20 hello_2.10.orig.tar.gz\n" +
	" " + sumC + " 30 hello_2.10-3.debian.tar.xz\n\n"

func readIndex(kind IndexKind, text string, pieces ...int) ([]IndexEntry, error) {
	var out []IndexEntry
	r := NewIndexReader(kind, func(e *IndexEntry) error { out = append(out, *e); return nil })
	data := []byte(text)
	for _, n := range pieces {
		n = min(n, len(data))
		if _, err := r.Write(data[:n]); err != nil {
			return out, err
		}
		data = data[n:]
	}
	if _, err := r.Write(data); err != nil {
		return out, err
	}
	return out, r.Close()
}

func TestIndexReaderPackages(t *testing.T) {
	got, err := readIndex(PackagesIndex, goodPackages)
	if err != nil {
		t.Fatal(err)
	}
	want := []IndexEntry{
		{Name: "hello", Version: "1:2.10-3", Architecture: "amd64", Path: "pool/main/h/hello/hello_2.10-3_amd64.deb", Size: 1234, SHA256: sumA, Line: 1},
		{Name: "tzdata", Version: "2024a", Architecture: "all", Path: "pool/main/t/tzdata/tzdata_2024a_all.deb", Size: 9, SHA256: sumB, Phased: "10", Line: 13},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("entries:\n%+v\nwant\n%+v", got, want)
	}
	// Any way of cutting the text gives the same entries.
	for cut := range len(goodPackages) + 1 {
		if again, err := readIndex(PackagesIndex, goodPackages, cut, 1, 7); err != nil || !reflect.DeepEqual(again, want) {
			t.Fatalf("cut at %d: %+v, %v", cut, again, err)
		}
	}
}

func TestIndexReaderSources(t *testing.T) {
	got, err := readIndex(SourcesIndex, goodSources)
	if err != nil {
		t.Fatal(err)
	}
	want := []IndexEntry{{Name: "hello", Version: "2.10-3", Architecture: "source",
		Path: "pool/main/h/hello/hello_2.10-3.dsc", Size: 1000, SHA256: sumA, Line: 1,
		Files: []manifest.File{
			{Path: "pool/main/h/hello/hello_2.10.orig.tar.gz", Size: 20, SHA256: sumB},
			{Path: "pool/main/h/hello/hello_2.10-3.debian.tar.xz", Size: 30, SHA256: sumC},
		}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("entries:\n%+v\nwant\n%+v", got, want)
	}
}

func TestIndexReaderBoundary(t *testing.T) {
	r := NewIndexReader(PackagesIndex, func(*IndexEntry) error { return nil })
	stanzas := strings.SplitAfter(goodPackages, "\n\n")
	if !r.AtBoundary() {
		t.Error("not at a boundary before any text")
	}
	r.Write([]byte(stanzas[0][:10]))
	if r.AtBoundary() {
		t.Error("at a boundary inside a stanza")
	}
	r.Write([]byte(stanzas[0][10 : len(stanzas[0])-1]))
	if r.AtBoundary() {
		t.Error("at a boundary before the blank line")
	}
	r.Write([]byte("\n"))
	if !r.AtBoundary() {
		t.Error("not at a boundary after the blank line")
	}
}

func TestIndexReaderRefuses(t *testing.T) {
	bin := func(s string) string {
		return "Package: a\nVersion: 1\nArchitecture: amd64\nFilename: pool/a.deb\nSize: 1\nSHA256: " + sumA + "\n" + s
	}
	tests := []struct {
		name, text, want string
		kind             IndexKind
	}{
		{"Filename twice", bin("filename: pool/b.deb\n"), "line 7: field Filename appears twice", PackagesIndex},
		{"SHA256 twice", bin("SHA256: " + sumB + "\n"), "field SHA256 appears twice", PackagesIndex},
		{"no SHA256", strings.Replace(bin(""), "SHA256", "SHA512", 1), "stanza at line 1 (package a): field SHA256: required field is missing", PackagesIndex},
		{"no Filename", strings.Replace(bin(""), "Filename", "Fylename", 1), "field Filename: required", PackagesIndex},
		{"upper-case digest", strings.Replace(bin(""), sumA, strings.ToUpper(sumA), 1), "field SHA256: \"AAAA", PackagesIndex},
		{"size not a number", strings.Replace(bin(""), "Size: 1", "Size: -1", 1), "field Size: \"-1\" is not a size", PackagesIndex},
		{"path climbs", strings.Replace(bin(""), "pool/a.deb", "pool/../../etc/passwd", 1), "not a clean relative path", PackagesIndex},
		{"white-space line", bin(" \nSection: x\n"), "line 7: a line of white space only", PackagesIndex},
		{"comment line", bin("# x\n"), "line 7: comment line", PackagesIndex},
		{"carriage return", strings.Replace(bin(""), "Size: 1\n", "Size: 1\r\n", 1), "line 5: carriage return", PackagesIndex},
		{"continuation first", " x\n" + bin(""), "line 1: continuation line before any field", PackagesIndex},
		{"not a field", bin("garbage\n"), "line 7: \"garbage\" is neither a field", PackagesIndex},
		{"Filename on two lines", strings.Replace(bin(""), "pool/a.deb\n", "pool/a.deb\n more\n", 1), "field Filename: not a one-line value", PackagesIndex},
		{"second stanza bad", bin("\nPackage: b\n"), "stanza at line 8 (package b): field Version", PackagesIndex},
		{"two .dsc", strings.Replace(goodSources, "hello_2.10.orig.tar.gz", "other.dsc", 1), "two .dsc files", SourcesIndex},
		{"no .dsc", strings.Replace(goodSources, "hello_2.10-3.dsc\n "+sumB, "hello_2.10-3.txt\n "+sumB, 1), "no .dsc file", SourcesIndex},
		{"file name with a slash", strings.Replace(goodSources, " hello_2.10.orig.tar.gz", " ../x.tar.gz", 1), "is not a file name", SourcesIndex},
		{"no Directory", strings.Replace(goodSources, "Directory:", "Durectory:", 1), "field Directory: required", SourcesIndex},
		{"checksum line short", strings.Replace(goodSources, " 20 hello_2.10.orig.tar.gz", " hello_2.10.orig.tar.gz", 1), "is not \"sha256 size name\"", SourcesIndex},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := readIndex(tc.kind, tc.text)
			if err == nil || !errors.Is(err, ErrIndex) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want ErrIndex containing %q", err, tc.want)
			}
		})
	}
}

func TestIndexReaderStopsOnCallbackError(t *testing.T) {
	stop := errors.New("stop")
	n := 0
	r := NewIndexReader(PackagesIndex, func(*IndexEntry) error { n++; return stop })
	if _, err := r.Write([]byte(goodPackages)); !errors.Is(err, stop) || n != 1 {
		t.Fatalf("write: %v after %d entries", err, n)
	}
	if _, err := r.Write([]byte("more")); !errors.Is(err, stop) {
		t.Errorf("write after the error: %v", err)
	}
}

// FuzzIndexReader: whatever the text and however it is cut, the reader gives the same
// answer; and every stanza it accepts, go-debian's paragraph reader reads with the same
// values.
func FuzzIndexReader(f *testing.F) {
	f.Add(goodPackages, uint8(3), false)
	f.Add(goodSources, uint8(9), true)
	f.Add("Package: a\n\n\n\nPackage: b\n", uint8(1), false)
	f.Fuzz(func(t *testing.T, text string, cut uint8, sources bool) {
		kind := PackagesIndex
		if sources {
			kind = SourcesIndex
		}
		whole, werr := readIndex(kind, text)
		pieces, perr := readIndex(kind, text, int(cut), int(cut)/2+1)
		if (werr == nil) != (perr == nil) || !reflect.DeepEqual(whole, pieces) {
			t.Fatalf("whole: %+v %v\npieces: %+v %v", whole, werr, pieces, perr)
		}
		if werr != nil {
			if !errors.Is(werr, ErrIndex) {
				t.Fatalf("error %v does not wrap ErrIndex", werr)
			}
			return
		}
		checkWithGoDebian(t, kind, text, whole)
	})
}

// checkWithGoDebian reads text with go-debian and compares the fields the entries hold.
func checkWithGoDebian(t *testing.T, kind IndexKind, text string, entries []IndexEntry) {
	t.Helper()
	pr, err := control.NewParagraphReader(strings.NewReader(text), nil)
	if err != nil {
		t.Fatalf("go-debian: %v", err)
	}
	var paras []*control.Paragraph
	for {
		p, err := pr.Next()
		if err != nil {
			break
		}
		paras = append(paras, p)
	}
	if len(paras) != len(entries) {
		t.Fatalf("go-debian reads %d paragraphs, we %d entries, of %q", len(paras), len(entries), text)
	}
	for i, e := range entries {
		get := func(name string) string {
			for k, v := range paras[i].Values {
				if strings.EqualFold(k, name) {
					return strings.TrimSpace(v)
				}
			}
			return ""
		}
		want := [][2]string{{get("Package"), e.Name}, {get("Version"), e.Version}}
		if kind == PackagesIndex {
			size, err := strconv.ParseInt(get("Size"), 10, 64)
			if err != nil || size != e.Size {
				t.Fatalf("stanza %d: go-debian reads size %q, we %d", i, get("Size"), e.Size)
			}
			want = append(want, [2]string{get("Architecture"), e.Architecture}, [2]string{get("Filename"), e.Path},
				[2]string{get("SHA256"), e.SHA256}, [2]string{get("Phased-Update-Percentage"), e.Phased})
		} else if !strings.Contains(get("Checksums-Sha256"), e.SHA256) {
			t.Fatalf("go-debian's Checksums-Sha256 %q lacks %s", get("Checksums-Sha256"), e.SHA256)
		}
		for _, w := range want {
			if w[0] != w[1] {
				t.Fatalf("stanza %d: go-debian reads %q, we %q, of %q", i, w[0], w[1], text)
			}
		}
	}
}
