package release

import (
	"bytes"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"
)

var (
	md5     = strings.Repeat("1a", 16)
	sha1    = strings.Repeat("2b", 20)
	sha256  = strings.Repeat("ab", 32)
	sha256b = strings.Repeat("cd", 32)
)

func TestParseSums(t *testing.T) {
	tests := []struct {
		name, in string
		want     map[string]Digests
		err      string
	}{
		{"apt-ftparchive layout", "Origin: x\nMD5Sum:\n " + md5 + " 10 main/Packages\nSHA256:\n " + sha256 + "       10 main/binary-amd64/Packages\n " + sha256 + " 0 main/binary-amd64/Release\n",
			map[string]Digests{"main/Packages": {Size: 10, MD5: md5}, "main/binary-amd64/Packages": {Size: 10, SHA256: sha256}, "main/binary-amd64/Release": {SHA256: sha256}}, ""},
		{"three sections", "MD5Sum:\n " + md5 + " 3 a\nSHA1:\n " + sha1 + " 3 a\nSHA256:\n " + sha256 + " 3 a\n",
			map[string]Digests{"a": {Size: 3, MD5: md5, SHA1: sha1, SHA256: sha256}}, ""},
		{"field name is case-insensitive", "sha256:\n\t" + sha256 + " 3 a\n", map[string]Digests{"a": {Size: 3, SHA256: sha256}}, ""},
		{"tabs separate", "SHA256:\n\t" + sha256 + "\t3\ta\n", map[string]Digests{"a": {Size: 3, SHA256: sha256}}, ""},
		{"CRLF", "SHA256:\r\n " + sha256 + " 1 x\r\n", map[string]Digests{"x": {Size: 1, SHA256: sha256}}, ""},
		{"an entry on the field's line", "SHA256: " + sha256 + " 3 a\n " + sha256b + " 4 b\n",
			map[string]Digests{"a": {Size: 3, SHA256: sha256}, "b": {Size: 4, SHA256: sha256b}}, ""},
		{"no sums", "Origin: x\nSHA512:\n 00 10 a\n", map[string]Digests{}, ""},
		{"leading blank lines", "\n\nSHA256:\n " + sha256 + " 3 a\n", map[string]Digests{"a": {Size: 3, SHA256: sha256}}, ""},
		{"same line twice", "SHA256:\n " + sha256 + " 3 a\n " + sha256 + " 3 a\n", map[string]Digests{"a": {Size: 3, SHA256: sha256}}, ""},
		{"field ends at the next field", "SHA256:\n " + sha256 + " 3 a\nX-Other:\n garbage here\n", map[string]Digests{"a": {Size: 3, SHA256: sha256}}, ""},
		{"paragraph ends at a blank line", "SHA256:\n " + sha256 + " 3 a\n\nSHA256:\n garbage\n", map[string]Digests{"a": {Size: 3, SHA256: sha256}}, ""},
		{"two fields", "SHA256:\n " + sha256 + " 3 a\nSHA256:\n", nil, "line 3: the SHA256 field appears twice"},
		{"two fields in other case", "Date: x\ndate: y\n", nil, "line 2: the date field appears twice"},
		{"conflicting lines", "SHA256:\n " + sha256 + " 3 a\n " + sha256 + " 4 a\n", nil, "line 3: a is listed twice"},
		{"conflicting sizes", "MD5Sum:\n " + md5 + " 3 a\nSHA256:\n " + sha256 + " 4 a\n", nil, "line 4: a is listed with sizes 3 and 4"},
		{"short line", "SHA256:\n " + sha256 + " 3\n", nil, "line 2: want"},
		{"long line", "SHA256:\n " + sha256 + " 3 a b\n", nil, "line 2: want"},
		{"blank continuation", "SHA256:\n \n", nil, "line 2: want"},
		{"bad digest", "SHA256:\n xyz 3 a\n", nil, "line 2: \"xyz\" is not a sha256"},
		{"upper-case digest", "SHA256:\n " + strings.ToUpper(sha256) + " 3 a\n", nil, "not a sha256"},
		{"md5 in SHA1", "SHA1:\n " + md5 + " 3 a\n", nil, "not a sha1"},
		{"short md5", "MD5Sum:\n 0123 3 a\n", nil, "not a md5 sum"},
		{"negative size", "SHA256:\n " + sha256 + " -3 a\n", nil, "bad size"},
		{"signed size", "SHA256:\n " + sha256 + " +3 a\n", nil, "bad size"},
		{"huge size", "SHA256:\n " + sha256 + " 99999999999999999999 a\n", nil, "bad size"},
		{"escaping path", "SHA256:\n " + sha256 + " 3 ../a\n", nil, "clean relative path"},
		{"absolute path", "SHA256:\n " + sha256 + " 3 /a\n", nil, "clean relative path"},
		{"not a field", "Origin: x\ngarbage\n", nil, "line 2: \"garbage\" is neither a field nor a continuation line"},
		{"space in a field name", "Valid Until: x\n", nil, "neither a field"},
		{"continuation first", " " + sha256 + " 3 a\n", nil, "line 1: continuation line"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Parse([]byte(tc.in))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error = %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(f.Sums, tc.want) {
				t.Errorf("sums:\n%+v\nwant:\n%+v", f.Sums, tc.want)
			}
		})
	}
}

func TestFields(t *testing.T) {
	f, err := Parse([]byte("Origin: o\nacquire-by-hash: yes \nDescription: one\n two\nSHA256:\n"))
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"Origin": "o", "origin": "o", "Acquire-By-Hash": "yes", "Description": "one\ntwo", "Label": "", "SHA256": "",
	} {
		if got := f.Field(name); got != want {
			t.Errorf("Field(%q) = %q, want %q", name, got, want)
		}
	}
}

var testDate = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

func TestMakeParses(t *testing.T) {
	files := map[string]Digests{
		"main/binary-amd64/Packages":    {Size: 10, MD5: md5, SHA256: sha256},
		"main/binary-amd64/Packages.gz": {Size: 0, MD5: md5, SHA256: sha256b},
	}
	h := Header{
		Origin: "o", Label: "l", Suite: "stable", Codename: "bookworm", Description: "d",
		Date: testDate, ValidUntil: testDate.Add(7 * 24 * time.Hour),
		Architectures: []string{"amd64", "arm64"}, Components: []string{"main"}, SignedBy: []string{"F1", "F2"},
	}
	data := Make(h, files)
	want := "Origin: o\nLabel: l\nSuite: stable\nCodename: bookworm\nDate: Sat, 21 Nov 2026 10:00:00 UTC\n" +
		"Valid-Until: Sat, 28 Nov 2026 10:00:00 UTC\nAcquire-By-Hash: yes\nSigned-By: F1, F2\n" +
		"Architectures: amd64 arm64\nComponents: main\nDescription: d\nMD5Sum:\n" +
		" " + md5 + "               10 main/binary-amd64/Packages\n" +
		" " + md5 + "                0 main/binary-amd64/Packages.gz\nSHA256:\n" +
		" " + sha256 + "               10 main/binary-amd64/Packages\n" +
		" " + sha256b + "                0 main/binary-amd64/Packages.gz\n"
	if string(data) != want {
		t.Fatalf("Make:\n%s\nwant:\n%s", data, want)
	}
	// A SHA-1 given is not written: Release lists what Debian's does.
	withSHA1 := maps.Clone(files)
	d := withSHA1["main/binary-amd64/Packages"]
	d.SHA1 = sha1
	withSHA1["main/binary-amd64/Packages"] = d
	if got := Make(h, withSHA1); !bytes.Equal(got, data) {
		t.Fatalf("Make with a SHA-1:\n%s\nwant:\n%s", got, data)
	}
	f, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(f.Sums, files) {
		t.Errorf("parsed sums %+v, want %+v", f.Sums, files)
	}
	if d, err := f.Date(); err != nil || !d.Equal(testDate) {
		t.Errorf("Date() = %v, %v", d, err)
	}
	if d, err := f.ValidUntil(); err != nil || !d.Equal(h.ValidUntil) {
		t.Errorf("ValidUntil() = %v, %v", d, err)
	}
	if got := f.Paths(); len(got) != 2 || got[0] != "main/binary-amd64/Packages" {
		t.Errorf("Paths() = %q", got)
	}
}

func TestRedate(t *testing.T) {
	in := "Origin: o\ndate: Sat, 21 Nov 2026 10:00:00 UTC\nValid-Until: Sat, 28 Nov 2026 10:00:00 UTC\nSHA256:\n " + sha256 + " 3 a\n"
	later := testDate.Add(36 * time.Hour)
	out, err := Redate([]byte(in), later)
	if err != nil {
		t.Fatal(err)
	}
	want := "Origin: o\nDate: Sun, 22 Nov 2026 22:00:00 UTC\nValid-Until: Sun, 29 Nov 2026 22:00:00 UTC\nSHA256:\n " + sha256 + " 3 a\n"
	if string(out) != want {
		t.Errorf("Redate:\n%s\nwant:\n%s", out, want)
	}
	if d, err := Date(out); err != nil || !d.Equal(later) {
		t.Errorf("Date after Redate = %v, %v", d, err)
	}
	if !SameButDates([]byte(in), out) {
		t.Error("SameButDates is false for a redated copy")
	}
	if SameButDates([]byte(in), []byte(strings.Replace(in, "Origin: o", "Origin: p", 1))) {
		t.Error("SameButDates is true for another Origin")
	}
	if SameButDates([]byte(in), []byte(strings.Replace(in, "Valid-Until: Sat, 28 Nov 2026 10:00:00 UTC\n", "", 1))) {
		t.Error("SameButDates is true when one has a Valid-Until and the other none (valid_for set or removed)")
	}
	for name, bad := range map[string]string{
		"no Date":         "Origin: o\n",
		"bad Date":        "Date: yesterday\n",
		"bad Valid-Until": "Date: Sat, 21 Nov 2026 10:00:00 UTC\nValid-Until: soon\n",
		"malformed":       "Date: Sat, 21 Nov 2026 10:00:00 UTC\ngarbage\n",
	} {
		if _, err := Redate([]byte(bad), later); err == nil {
			t.Errorf("%s: Redate succeeded", name)
		}
	}
	// Without Valid-Until, only Date changes.
	out, err = Redate([]byte("Date: Sat, 21 Nov 2026 10:00:00 UTC\nLabel: l"), later)
	if err != nil || string(out) != "Date: Sun, 22 Nov 2026 22:00:00 UTC\nLabel: l" {
		t.Errorf("Redate = %q, %v", out, err)
	}
}

// BenchmarkParse: a Release listing 10,000 files in each section.
func BenchmarkParse(b *testing.B) {
	files := map[string]Digests{}
	for i := range 10_000 {
		files[fmt.Sprintf("c%d/binary-amd64/Packages", i)] = Digests{Size: int64(i), MD5: md5, SHA1: sha1, SHA256: sha256}
	}
	data := Make(Header{Date: testDate}, files)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := Parse(data); err != nil {
			b.Fatal(err)
		}
	}
}
