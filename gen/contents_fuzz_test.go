package gen

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// FuzzMergeContents feeds arbitrary parent Contents files to the merge: it must not
// panic, must drop every package it is told is gone, must list every added file, and
// must write only lines of a path, blanks and a package list.
func FuzzMergeContents(f *testing.F) {
	f.Add([]byte(fmt.Sprintf("%-55s %s\n%-55s %s\n", "etc/a", "utils/a,b", "usr/bin/b", "b")), "b", "usr/bin/c", "admin")
	f.Add([]byte("usr/share/doc/x y/z    doc/x\n"), "x", "usr/share/doc/x y/z", "")
	f.Add([]byte("no-separator\n\n \t\nlast-line-without-newline a"), "a", "a", "contrib/misc")
	f.Add([]byte("FILE                                                    LOCATION\nusr/bin/a a\n"), "", "usr/bin/0", "s")
	f.Fuzz(func(t *testing.T, base []byte, gone, path, section string) {
		if strings.ContainsAny(path, "\n\r") || strings.ContainsAny(section, " \t\n,") || path == "" || strings.TrimSpace(path) != path {
			return // the .deb reader never yields such a path, nor a control file such a section
		}
		added := []fileList{{name: "newpkg", section: section, files: []string{path}}}
		goneSet := map[string]bool{gone: true}
		out := mergeContents(slices.Clone(base), goneSet, added)
		if len(out) > 0 && out[len(out)-1] != '\n' {
			t.Fatalf("output does not end with a newline: %q", out)
		}
		found := false
		for _, line := range bytes.Split(bytes.TrimSuffix(out, []byte("\n")), []byte("\n")) {
			if len(out) == 0 {
				break
			}
			p := contentsPath(line)
			if len(p) == 0 {
				t.Fatalf("line %q has no path and package list", line)
			}
			for _, it := range strings.Split(string(line[bytes.LastIndexAny(line, " \t")+1:]), ",") {
				if it == "" || gone != "newpkg" && itemName(it) == gone && gone != "" {
					t.Fatalf("line %q lists an empty or gone package (gone %q)", line, gone)
				}
				if string(p) == path && itemName(it) == "newpkg" {
					found = true
				}
			}
		}
		if !found {
			t.Fatalf("the added file %q is not listed:\n%s", path, out)
		}
	})
}

// BenchmarkContentsAddOne10k times what a build adds for Contents when one package joins
// an index of 10,000 (one file each, as the synthetic benchmark packages have): merging
// its lines into the parent's file, compressing, and the digests of both forms.
func BenchmarkContentsAddOne10k(b *testing.B) {
	var lists []fileList
	for i := range 10_000 {
		name := fmt.Sprintf("pkg%06d", i)
		lists = append(lists, fileList{name: name, section: "utils", files: []string{"usr/share/doc/" + name + "/README"}})
	}
	base := mergeContents(nil, nil, lists)
	added := []fileList{{name: "pkg005000extra", section: "utils", files: []string{"usr/share/doc/pkg005000extra/README"}}}
	b.SetBytes(int64(len(base)))
	b.ResetTimer()
	for range b.N {
		plain := mergeContents(slices.Clone(base), map[string]bool{}, added)
		gz, err := gzipContents(plain)
		if err != nil {
			b.Fatal(err)
		}
		digestsOf(plain)
		digestsOf(gz)
	}
}

// FuzzParseFileList feeds arbitrary cache entries to the parser: it must not panic, must
// refuse an entry of another package, and what it accepts must encode back to the input.
func FuzzParseFileList(f *testing.F) {
	f.Add("tool\tutils\nusr/bin/tool\nend\n", "tool")
	f.Add("tool\t\nend\n", "tool")
	f.Add("other\tutils\nusr/bin/x\nend\n", "tool")
	f.Add("tool\tutils\nusr/bin/tool\n", "tool")
	f.Fuzz(func(t *testing.T, s, name string) {
		fl, ok := parseFileList(s, name)
		if !ok {
			return
		}
		if fl.name != name {
			t.Fatalf("accepted an entry of %q for %q", fl.name, name)
		}
		if got := string(encodeFileList(fl)); got != s {
			t.Fatalf("entry %q encodes back as %q", s, got)
		}
	})
}
