package deb

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/armor-apt/armor/internal/testkit/synth"
	"pault.ag/go/debian/control"
)

// TestStanzaMatchesAptFtparchive compares Stanza with what apt-ftparchive writes
// for the same files: the real packages under testdata/debs and synthetic ones
// (with every control.tar compression, an epoch, a Source with a version).
//
// Field order aside, the stanzas must agree field for field, with one deliberate
// difference: apt-ftparchive adds SHA512, armor does not. Debian's own archive
// publishes MD5sum and SHA256 only, apt 2.x verifies a download against the
// strongest hash an index offers, and SHA256 is what apt requires; SHA512 would
// only make every Packages file bigger. Order differs because apt-ftparchive
// sorts fields into its canonical order, while armor keeps the control file's
// order, as dak does; apt reads either.
func TestStanzaMatchesAptFtparchive(t *testing.T) {
	needTool(t, "apt-ftparchive")
	dir := t.TempDir()
	for _, p := range realDebs(t) {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(p)), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := synth.Write(filepath.Join(dir, "synth"), synth.Options{N: 16, Seed: 7, AllEvery: 4}); err != nil {
		t.Fatal(err)
	}
	extra := map[string]string{
		"epoch_1.0-1_amd64.deb":  strings.Replace(goodControl, "Version: 2.10-3", "Version: 1:1.0-1", 1),
		"src_2.0-1+b1_amd64.deb": strings.Replace(goodControl, "Version: 2.10-3", "Source: hello-src (2.0-1)\nVersion: 2.0-1+b1", 1),
		"xz_1_amd64.deb":         goodControl,
		"zst_1_amd64.deb":        goodControl,
		"none_1_amd64.deb":       goodControl,
		"priority_1_all.deb":     strings.Replace(goodControl, "Architecture: amd64", "Architecture: all\nPriority: extra\nHomepage: https://example.invalid/", 1),
	}
	for name, ctl := range extra {
		compression := strings.SplitN(name, "_", 2)[0]
		if compression != "xz" && compression != "zst" && compression != "none" {
			compression = "gz"
		}
		if err := os.WriteFile(filepath.Join(dir, name), encode(t, ctl, compression), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	cmd := exec.Command("apt-ftparchive", "packages", ".")
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("apt-ftparchive packages: %v\n%s", err, stderr.String())
	}
	theirs := parseParagraphs(t, out)
	if want := 4 + 16 + len(extra); len(theirs) != want {
		t.Fatalf("apt-ftparchive listed %d packages, want %d", len(theirs), want)
	}
	rawTheirs := strings.Split(strings.TrimSpace(string(out)), "\n\n")

	for i, their := range theirs {
		filename := their.Values["Filename"]
		t.Run(filename, func(t *testing.T) {
			p, err := ReadFile(filepath.Join(dir, filename))
			if err != nil {
				t.Fatal(err)
			}
			stanza := p.Stanza(filename)
			if !bytes.HasSuffix(stanza, []byte("\n")) || bytes.HasSuffix(stanza, []byte("\n\n")) {
				t.Errorf("stanza does not end with exactly one newline: %q", stanza)
			}
			oursList := parseParagraphs(t, stanza)
			if len(oursList) != 1 {
				t.Fatalf("stanza parses as %d paragraphs", len(oursList))
			}
			ours := oursList[0]
			for _, k := range their.Order {
				if k == "SHA512" {
					continue // deliberately left out, see above
				}
				if ours.Values[k] != their.Values[k] {
					t.Errorf("field %s\n ours: %q\ntheirs: %q", k, ours.Values[k], their.Values[k])
				}
			}
			for _, k := range ours.Order {
				if _, ok := their.Values[k]; !ok {
					t.Errorf("field %s is ours only", k)
				}
			}
			// go-debian normalises continuation lines, so compare them
			// raw too: each of our lines appears in apt-ftparchive's stanza.
			theirLines := map[string]bool{}
			for _, l := range strings.Split(rawTheirs[i], "\n") {
				theirLines[l] = true
			}
			for _, l := range strings.Split(strings.TrimSuffix(string(stanza), "\n"), "\n") {
				if !theirLines[l] {
					t.Errorf("line %q of our stanza is not in apt-ftparchive's", l)
				}
			}
		})
	}
}

func parseParagraphs(t testing.TB, b []byte) []control.Paragraph {
	t.Helper()
	r, err := control.NewParagraphReader(bytes.NewReader(b), nil)
	if err != nil {
		t.Fatal(err)
	}
	ps, err := r.All()
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

func TestStanzaFieldsArmorSets(t *testing.T) {
	ctl := "Package: hello\nFilename: evil.deb\nVersion: 1.0-1\nSize: 1\nArchitecture: all\n" +
		"MD5sum: 00\nSHA1: 00\nSHA256: 00\nsha512: 00\nStatus: install ok installed\nOptional: x\n" +
		"Description-md5: 0123\nDescription:\n only continuation lines\n .\n here\n"
	data := encode(t, ctl, "gz")
	p, err := Read(bytes.NewReader(data), "hello.deb", -1)
	if err != nil {
		t.Fatal(err)
	}
	got := string(p.Stanza("pool/main/h/hello/hello_1.0-1_all.deb"))
	want := "Package: hello\nVersion: 1.0-1\nArchitecture: all\nDescription-md5: 0123\n" +
		"Description:\n only continuation lines\n .\n here\n" +
		"Filename: pool/main/h/hello/hello_1.0-1_all.deb\nSize: " + strconv.FormatInt(p.Size, 10) + "\n" +
		"MD5sum: " + p.MD5 + "\nSHA1: " + p.SHA1 + "\nSHA256: " + p.SHA256 + "\n"
	if got != want {
		t.Errorf("stanza\n got:\n%s\nwant:\n%s", got, want)
	}
}

func TestParseControlKeepsLines(t *testing.T) {
	tests := []struct {
		name, in string
		want     []Field
	}{
		{"simple", "A: 1\nB: two words\n", []Field{{"A", "1"}, {"B", "two words"}}},
		{"continuation", "D: short\n long\n .\n  indented\n", []Field{{"D", "short\n long\n .\n  indented"}}},
		{"tab continuation", "D: x\n\tt\n", []Field{{"D", "x\n\tt"}}},
		{"empty first line", "D:\n a\n b\n", []Field{{"D", "\n a\n b"}}},
		{"trailing white space", "A: 1  \r\nB:\t2\t\n", []Field{{"A", "1"}, {"B", "2"}}},
		{"no final newline", "A: 1", []Field{{"A", "1"}}},
		{"blank lines around", "\n\nA: 1\n\n\n", []Field{{"A", "1"}}},
		{"comment", "# note\nA: 1\n", []Field{{"A", "1"}}},
		{"colon in value", "A: http://x:80/\n", []Field{{"A", "http://x:80/"}}},
		{"empty value", "A:\nB: 2\n", []Field{{"A", ""}, {"B", "2"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseControl([]byte(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("field %d = %q, want %q", i, got[i], tt.want[i])
				}
			}
		})
	}
}
