package release

import (
	"maps"
	"strings"
	"testing"

	"github.com/armor-apt/armor/manifest"
)

// FuzzParse: Parse never panics; what it accepts is well formed, survives Make, and
// survives Redate.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"Origin: x\nSHA256:\n " + sha256 + " 10 main/binary-amd64/Packages\n",
		"SHA256:\n " + sha256 + " 3 a\n " + sha256 + " 4 a\n",
		"sha256:\n\t" + sha256 + " 0 a/b\n\nSHA256:\n",
		"SHA256:\r\n " + sha256 + " 1 x\r\n",
		"Date: Sat, 21 Nov 2026 10:00:00 UTC\nValid-Until: Sat, 28 Nov 2026 10:00:00 UTC\nMD5Sum:\n " + md5 + " 3 a\nSHA1:\n " + sha1 + " 3 a\nSHA256:\n " + sha256 + " 3 a\n",
		"SHA256: " + sha256 + " 3 a\nDescription: x\n y\n",
		"",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		rf, err := Parse(data)
		if err != nil {
			return
		}
		complete := map[string]Digests{}
		for p, d := range rf.Sums {
			if !manifest.ValidPath(p) || d.Size < 0 || d.MD5 == "" && d.SHA1 == "" && d.SHA256 == "" ||
				d.MD5 != "" && !isHex(d.MD5, 32) || d.SHA1 != "" && !isHex(d.SHA1, 40) || d.SHA256 != "" && !manifest.ValidDigest(d.SHA256) {
				t.Fatalf("accepted a bad entry %s %+v", p, d)
			}
			if d.MD5 != "" && d.SHA256 != "" {
				d.SHA1 = "" // Make does not write it
				complete[p] = d
			}
		}
		again, err := Parse(Make(Header{}, complete))
		if err != nil || !maps.Equal(again.Sums, complete) {
			t.Fatalf("Make of the parsed sums parses as %+v, %v; want %+v", again, err, complete)
		}
		if _, err := rf.Date(); err != nil {
			return
		}
		out, err := Redate(data, testDate)
		if err != nil {
			if !strings.Contains(err.Error(), "Valid-Until") {
				t.Fatalf("Redate of a release with a Date: %v", err)
			}
			return
		}
		redated, err := Parse(out)
		if err != nil {
			t.Fatalf("Redate's output does not parse: %v\n%q", err, out)
		}
		if d, err := redated.Date(); err != nil || !d.Equal(testDate) || !maps.Equal(redated.Sums, rf.Sums) {
			t.Fatalf("Redate's output has Date %v (%v) and sums %+v", d, err, redated.Sums)
		}
	})
}
