package release

import (
	"bytes"
	"fmt"
	"sort"
	"strings"
	"time"
)

// Digests are the size and sums Release lists for one file.
type Digests struct {
	Size              int64
	MD5, SHA1, SHA256 string // lowercase hex; empty when the file lacks that section
}

// Header is what a Release file says about its suite, ahead of the sums.
type Header struct {
	Origin, Label, Suite, Codename, Description string
	Date                                        time.Time
	ValidUntil                                  time.Time // zero: no Valid-Until field
	Architectures, Components                   []string
	SignedBy                                    []string // key fingerprints
	// NotAutomatic makes apt install from the suite only when asked (pin priority 1),
	// as for experimental or backports; ButAutomaticUpgrades (with NotAutomatic) lets
	// packages installed from it be upgraded from it (pin priority 100).
	NotAutomatic, ButAutomaticUpgrades bool
}

// dateLayout is how Debian archives write Date and Valid-Until:
// "Sat, 21 Nov 2026 10:00:00 UTC".
const dateLayout = "Mon, 02 Jan 2006 15:04:05 MST"

// FormatDate formats a time as Date and Valid-Until are written, in UTC.
func FormatDate(t time.Time) string {
	return t.UTC().Format("Mon, 02 Jan 2006 15:04:05 UTC")
}

// ParseDate reads a Date or Valid-Until value.
func ParseDate(v string) (time.Time, error) {
	return time.Parse(dateLayout, v)
}

// Make returns the Release file for a suite, as apt-ftparchive lays it out. files maps
// paths relative to dists/<codename>/ to their digests; they are listed sorted by path in
// the MD5Sum and SHA256 sections, the two Debian's archive lists (apt does not trust
// SHA-1, and Debian's Release files dropped it). A digest's SHA1 is not written.
func Make(h Header, files map[string]Digests) []byte {
	var b bytes.Buffer
	field := func(name, value string) {
		if value != "" {
			fmt.Fprintf(&b, "%s: %s\n", name, value)
		}
	}
	field("Origin", h.Origin)
	field("Label", h.Label)
	field("Suite", h.Suite)
	field("Codename", h.Codename)
	field("Date", FormatDate(h.Date))
	if !h.ValidUntil.IsZero() {
		field("Valid-Until", FormatDate(h.ValidUntil))
	}
	if h.NotAutomatic {
		field("NotAutomatic", "yes")
		if h.ButAutomaticUpgrades {
			field("ButAutomaticUpgrades", "yes")
		}
	}
	field("Acquire-By-Hash", "yes")
	field("Signed-By", strings.Join(h.SignedBy, ", "))
	field("Architectures", strings.Join(h.Architectures, " "))
	field("Components", strings.Join(h.Components, " "))
	field("Description", h.Description)
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, s := range sections {
		if s.name == "SHA1" {
			continue
		}
		b.WriteString(s.name + ":\n")
		for _, p := range paths {
			d := files[p]
			fmt.Fprintf(&b, " %s %16d %s\n", *s.sum(&d), d.Size, p)
		}
	}
	return b.Bytes()
}
