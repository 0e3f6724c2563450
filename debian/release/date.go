package release

import (
	"bytes"
	"strings"
	"time"
)

// Date returns the Date field of the Release file data.
func Date(data []byte) (time.Time, error) {
	f, err := Parse(data)
	if err != nil {
		return time.Time{}, err
	}
	return f.Date()
}

// Redate returns the Release file data with its Date set to date and its Valid-Until, if
// any, moved by the same amount, so that a re-signed copy of an older release is newer
// than anything apt has seen: apt ignores an InRelease older than the one it holds. Every
// other byte stays as it was.
func Redate(data []byte, date time.Time) ([]byte, error) {
	f, err := Parse(data)
	if err != nil {
		return nil, err
	}
	old, err := f.Date()
	if err != nil {
		return nil, err
	}
	until, err := f.ValidUntil()
	if err != nil {
		return nil, err
	}
	repl := map[string]string{"date": "Date: " + FormatDate(date) + "\n"}
	if !until.IsZero() {
		repl["valid-until"] = "Valid-Until: " + FormatDate(until.Add(date.Sub(old))) + "\n"
	}
	return f.replaceLines(data, repl), nil
}

// SameButDates reports whether two Release files are the same but for the values of
// their Date and Valid-Until fields: whether re-signing one would publish anything new. A file that
// does not parse is the same as nothing.
func SameButDates(a, b []byte) bool {
	fa, err := Parse(a)
	if err != nil {
		return false
	}
	fb, err := Parse(b)
	if err != nil {
		return false
	}
	// Each date's value is masked, not dropped: a Valid-Until that appears or goes (a
	// suite's valid_for set or removed) is a change to publish.
	mask := map[string]string{"date": "Date: *\n", "valid-until": "Valid-Until: *\n"}
	return bytes.Equal(fa.replaceLines(a, mask), fb.replaceLines(b, mask))
}

// replaceLines returns data, which f was parsed from, with the first line of each field
// named in repl (by its lowercase name) replaced by repl's value.
func (f *File) replaceLines(data []byte, repl map[string]string) []byte {
	out := make([]byte, 0, len(data)+64)
	at := 0
	for _, fl := range f.fields {
		r, ok := repl[strings.ToLower(fl.name)]
		if !ok {
			continue
		}
		out = append(out, data[at:fl.start]...)
		out = append(out, r...)
		at = fl.end
	}
	return append(out, data[at:]...)
}
