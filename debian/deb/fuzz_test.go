package deb

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"pault.ag/go/debian/control"
)

// FuzzRead feeds arbitrary bytes to Read: it must not panic, and it must return
// either an error naming the input or a package that passes validation and whose
// digests and stanza are right.
func FuzzRead(f *testing.F) {
	for _, p := range realDebs(f) {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
		f.Add(data[:len(data)*2/3])
	}
	for _, c := range []string{"gz", "xz", "zst", "none"} {
		f.Add(encode(f, goodControl, c))
	}
	f.Add(encode(f, "Package: a\n", "none"))
	f.Add([]byte("!<arch>\n"))
	f.Add([]byte("Package: hello\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		const name = "fuzz.deb"
		p, err := Read(bytes.NewReader(data), name, int64(len(data)))
		if err != nil {
			if !strings.HasPrefix(err.Error(), name+": ") {
				t.Fatalf("error %q does not name the input", err)
			}
			return
		}
		if checkPackageName(p.Name) != nil || checkVersion(p.Version) != nil || checkArch(p.Architecture) != nil ||
			checkPackageName(p.Source) != nil || checkVersion(p.SourceVersion) != nil {
			t.Fatalf("accepted invalid package %q %q %q from %q %q", p.Name, p.Version, p.Architecture, p.Source, p.SourceVersion)
		}
		if sum := sha256.Sum256(data); p.Size != int64(len(data)) || p.SHA256 != hex.EncodeToString(sum[:]) {
			t.Fatalf("size %d sha256 %s, want %d %x", p.Size, p.SHA256, len(data), sum)
		}
		checkStanza(t, p)
		for i, f := range p.Files {
			if c, ok := contentsPath(f); !ok || c != f || i > 0 && p.Files[i-1] >= f {
				t.Fatalf("file list not clean and sorted: %q", p.Files)
			}
		}
	})
}

// checkStanza parses a package's stanza back and compares it with the package.
func checkStanza(t *testing.T, p *Package) {
	t.Helper()
	stanza := p.Stanza("pool/main/x/x/x.deb")
	fields, err := parseControl(stanza)
	if err != nil {
		t.Fatalf("stanza does not parse: %v\n%s", err, stanza)
	}
	var want []Field
	for _, f := range p.Fields {
		if !overridden[strings.ToLower(f.Name)] {
			want = append(want, f)
		}
	}
	want = append(want, Field{"Filename", "pool/main/x/x/x.deb"}, Field{"Size", strconv.FormatInt(p.Size, 10)},
		Field{"MD5sum", p.MD5}, Field{"SHA1", p.SHA1}, Field{"SHA256", p.SHA256})
	if len(fields) != len(want) {
		t.Fatalf("stanza has %d fields, want %d:\n%s", len(fields), len(want), stanza)
	}
	for i := range want {
		if fields[i] != want[i] {
			t.Fatalf("stanza field %d is %q, want %q", i, fields[i], want[i])
		}
	}
}

// FuzzControl parses arbitrary control files. Whatever parses must render back
// (as Stanza writes fields) to text that parses to the same fields, and that
// pault.ag/go/debian/control, an independent deb822 parser, reads as the same
// fields with the same values (modulo its normalising of continuation lines).
func FuzzControl(f *testing.F) {
	f.Add([]byte(goodControl))
	f.Add([]byte("A: 1\nB:\n b\n .\n  c\n"))
	f.Add([]byte("# c\n\nA: x:y\n\tz\n\n"))
	f.Add([]byte("A: 1\r\nB: 2\r\n"))
	f.Add([]byte("A:1\n\nB: 2\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		fields, err := parseControl(data)
		if err != nil {
			return
		}
		var b bytes.Buffer
		for _, fl := range fields {
			writeField(&b, fl.Name, fl.Value)
		}
		again, err := parseControl(b.Bytes())
		if err != nil {
			t.Fatalf("rendered fields do not parse: %v\n%q", err, b.String())
		}
		if len(again) != len(fields) {
			t.Fatalf("round trip gave %d fields, want %d", len(again), len(fields))
		}
		for i := range fields {
			if again[i] != fields[i] {
				t.Fatalf("round trip changed field %d from %q to %q", i, fields[i], again[i])
			}
		}

		r, err := control.NewParagraphReader(bytes.NewReader(b.Bytes()), nil)
		if err != nil {
			t.Fatal(err)
		}
		ps, err := r.All()
		if err != nil {
			t.Fatalf("go-debian cannot read our output: %v\n%q", err, b.String())
		}
		if len(ps) != 1 || len(ps[0].Order) != len(fields) {
			t.Fatalf("go-debian reads %d paragraphs from our output %q", len(ps), b.String())
		}
		for i, fl := range fields {
			if ps[0].Order[i] != fl.Name {
				t.Fatalf("go-debian reads field %d as %q, want %q", i, ps[0].Order[i], fl.Name)
			}
			if got, want := ps[0].Values[fl.Name], goDebianValue(fl.Value); got != want {
				t.Fatalf("go-debian reads %s as %q, want %q", fl.Name, got, want)
			}
		}
	})
}

// goDebianValue is how pault.ag/go/debian/control represents a value: the first
// line trimmed, continuation lines without their first character, a lone "."
// as an empty line, each continuation line ending in "\n", and an empty first
// line dropped.
func goDebianValue(v string) string {
	lines := strings.Split(v, "\n")
	out := strings.TrimSpace(lines[0])
	for _, l := range lines[1:] {
		l = strings.TrimRightFunc(l[1:], unicode.IsSpace)
		if l == "." {
			l = ""
		}
		if out != "" && !strings.HasSuffix(out, "\n") {
			out += "\n"
		}
		out += l + "\n"
	}
	return out
}

// FuzzStanza validates arbitrary control files as package metadata. Errors must
// name the input; a package that passes must have a stanza that both parsers
// read back as its fields followed by the ones armor sets.
func FuzzStanza(f *testing.F) {
	f.Add([]byte(goodControl))
	f.Add([]byte("Package: libfoo1\nSource: libfoo (1:1.0-1)\nVersion: 1:1.0-1+b1\nArchitecture: all\nSize: 3\n"))
	f.Add([]byte("Package: a0\nVersion: 0\nArchitecture: musl-linux-amd64\nDescription:\n x\n"))
	for _, p := range realDebs(f) {
		f.Add(arMemberControl(f, p))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := newPackage("fuzz.deb", data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz.deb: ") {
				t.Fatalf("error %q does not name the input", err)
			}
			return
		}
		p.Size, p.MD5, p.SHA1, p.SHA256 = 1, "m", "s1", "s256"
		checkStanza(t, p)
		// Field names match without regard to case, in apt as in armor;
		// go-debian's map does not, so look names up by their spelling.
		ps := parseParagraphs(t, p.Stanza("f.deb"))
		if len(ps) != 1 {
			t.Fatalf("go-debian reads %d paragraphs from one stanza", len(ps))
		}
		get := func(name string) string {
			for _, k := range ps[0].Order {
				if strings.EqualFold(k, name) {
					return ps[0].Values[k]
				}
			}
			return ""
		}
		if get("Package") != p.Name || get("Version") != p.Version || get("SHA256") != "s256" {
			t.Fatalf("go-debian reads the stanza of %s %s as %v", p.Name, p.Version, ps)
		}
	})
}

// arMemberControl returns the control file of a real package, for seeds.
func arMemberControl(f *testing.F, path string) []byte {
	f.Helper()
	p, err := ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	var b bytes.Buffer
	for _, fl := range p.Fields {
		writeField(&b, fl.Name, fl.Value)
	}
	return b.Bytes()
}
