package gen

import (
	"bufio"
	"bytes"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/armor-apt/armor/gen/index"
)

// ReleaseInfo is the header of a suite's Release file.
type ReleaseInfo struct {
	Origin, Label, Suite, Codename, Description string
	Date                                        time.Time
	ValidUntil                                  time.Time // zero: no Valid-Until field
	Architectures, Components                   []string
	SignedBy                                    []string // key fingerprints
}

// Digests are the sums Release lists for one file, as apt-ftparchive writes them.
type Digests = index.Digests

// releaseDate formats a time as Debian archives do: "Sat, 21 Nov 2026 10:00:00 UTC".
func releaseDate(t time.Time) string {
	return t.UTC().Format("Mon, 02 Jan 2006 15:04:05 UTC")
}

// MakeRelease returns the Release file for a suite. files maps paths relative to
// dists/<codename>/ to their digests; they are listed sorted by path in the MD5Sum, SHA1
// and SHA256 sections.
func MakeRelease(info ReleaseInfo, files map[string]Digests) []byte {
	var b bytes.Buffer
	field := func(name, value string) {
		if value != "" {
			fmt.Fprintf(&b, "%s: %s\n", name, value)
		}
	}
	field("Origin", info.Origin)
	field("Label", info.Label)
	field("Suite", info.Suite)
	field("Codename", info.Codename)
	field("Date", releaseDate(info.Date))
	if !info.ValidUntil.IsZero() {
		field("Valid-Until", releaseDate(info.ValidUntil))
	}
	field("Acquire-By-Hash", "yes")
	field("Signed-By", strings.Join(info.SignedBy, ", "))
	field("Architectures", strings.Join(info.Architectures, " "))
	field("Components", strings.Join(info.Components, " "))
	field("Description", info.Description)
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	section := func(name string, sum func(Digests) string) {
		b.WriteString(name + ":\n")
		for _, p := range paths {
			d := files[p]
			fmt.Fprintf(&b, " %s %16d %s\n", sum(d), d.Size, p)
		}
	}
	section("MD5Sum", func(d Digests) string { return d.MD5 })
	section("SHA1", func(d Digests) string { return d.SHA1 })
	section("SHA256", func(d Digests) string { return d.SHA256 })
	return b.Bytes()
}

// ParseReleaseSums reads the MD5Sum, SHA1 and SHA256 sections of a Release file into a
// map of path to digests. A path missing from a section keeps that digest empty.
func ParseReleaseSums(release []byte) (map[string]Digests, error) {
	out := map[string]Digests{}
	section := ""
	sc := bufio.NewScanner(bytes.NewReader(release))
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		text := sc.Text()
		if !strings.HasPrefix(text, " ") {
			section = ""
			if name, rest, ok := strings.Cut(text, ":"); ok && strings.TrimSpace(rest) == "" {
				section = name
			}
			continue
		}
		if section != "MD5Sum" && section != "SHA1" && section != "SHA256" {
			continue
		}
		f := strings.Fields(text)
		if len(f) != 3 {
			return nil, fmt.Errorf("release line %d: want \"<hash> <size> <path>\", got %q", line, text)
		}
		size, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil || size < 0 {
			return nil, fmt.Errorf("release line %d: bad size %q", line, f[1])
		}
		d := out[f[2]]
		if d.Size != 0 && d.Size != size {
			return nil, fmt.Errorf("release line %d: %s listed with sizes %d and %d", line, f[2], d.Size, size)
		}
		d.Size = size
		switch section {
		case "MD5Sum":
			d.MD5 = f[0]
		case "SHA1":
			d.SHA1 = f[0]
		case "SHA256":
			d.SHA256 = f[0]
		}
		out[f[2]] = d
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read release: %w", err)
	}
	return out, nil
}

// releaseBody drops the Date and Valid-Until lines, so two Release files can be compared
// for everything a rebuild would change.
func releaseBody(release []byte) []byte {
	var b bytes.Buffer
	for _, line := range bytes.SplitAfter(release, []byte("\n")) {
		if bytes.HasPrefix(line, []byte("Date: ")) || bytes.HasPrefix(line, []byte("Valid-Until: ")) {
			continue
		}
		b.Write(line)
	}
	return b.Bytes()
}

// Redate returns release with its Date set to date and its Valid-Until, if any, moved by
// the same amount, so that a re-signed copy of an older release is newer than anything
// apt has seen: apt ignores an InRelease older than the one it holds.
func Redate(release []byte, date time.Time) ([]byte, error) {
	var old time.Time
	var out bytes.Buffer
	lines := bytes.SplitAfter(release, []byte("\n"))
	for _, line := range lines {
		if v, ok := bytes.CutPrefix(line, []byte("Date: ")); ok {
			t, err := time.Parse("Mon, 02 Jan 2006 15:04:05 MST", strings.TrimSpace(string(v)))
			if err != nil {
				return nil, fmt.Errorf("release Date %q: %w", strings.TrimSpace(string(v)), err)
			}
			old = t
		}
	}
	if old.IsZero() {
		return nil, fmt.Errorf("release has no Date field")
	}
	delta := date.Sub(old)
	for _, line := range lines {
		switch {
		case bytes.HasPrefix(line, []byte("Date: ")):
			fmt.Fprintf(&out, "Date: %s\n", releaseDate(date))
		case bytes.HasPrefix(line, []byte("Valid-Until: ")):
			t, err := time.Parse("Mon, 02 Jan 2006 15:04:05 MST", strings.TrimSpace(string(line[len("Valid-Until: "):])))
			if err != nil {
				return nil, fmt.Errorf("release Valid-Until: %w", err)
			}
			fmt.Fprintf(&out, "Valid-Until: %s\n", releaseDate(t.Add(delta)))
		default:
			out.Write(line)
		}
	}
	return out.Bytes(), nil
}

// ReleaseDate returns the Date field of a Release file.
func ReleaseDate(release []byte) (time.Time, error) {
	v := releaseField(release, "Date")
	t, err := time.Parse("Mon, 02 Jan 2006 15:04:05 MST", v)
	if err != nil {
		return time.Time{}, fmt.Errorf("release Date %q: %w", v, err)
	}
	return t, nil
}
