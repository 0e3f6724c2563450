package controld

import (
	"strings"
	"testing"
)

func TestParseReleaseSHA256(t *testing.T) {
	sum := strings.Repeat("ab", 32)
	tests := []struct {
		name, in string
		want     []releaseEntry
		err      string
	}{
		{"apt-ftparchive layout", "Origin: x\nMD5Sum:\n 0123 10 main/Packages\nSHA256:\n " + sum + "       10 main/binary-amd64/Packages\n " + sum + " 0 main/binary-amd64/Release\n",
			[]releaseEntry{{sum, 10, "main/binary-amd64/Packages"}, {sum, 0, "main/binary-amd64/Release"}}, ""},
		{"field name is case-insensitive", "sha256:\n\t" + sum + " 3 a\n", []releaseEntry{{sum, 3, "a"}}, ""},
		{"no SHA256 field", "Origin: x\nSHA1:\n 0123 10 a\n", nil, ""},
		{"same line twice", "SHA256:\n " + sum + " 3 a\n " + sum + " 3 a\n", []releaseEntry{{sum, 3, "a"}}, ""},
		{"field ends at the next field", "SHA256:\n " + sum + " 3 a\nX-Other:\n garbage here\n", []releaseEntry{{sum, 3, "a"}}, ""},
		{"two fields", "SHA256:\n " + sum + " 3 a\nSHA256:\n", nil, "appears twice"},
		{"conflicting lines", "SHA256:\n " + sum + " 3 a\n " + sum + " 4 a\n", nil, "listed twice"},
		{"short line", "SHA256:\n " + sum + " 3\n", nil, "want"},
		{"bad digest", "SHA256:\n xyz 3 a\n", nil, "not a sha256"},
		{"negative size", "SHA256:\n " + sum + " -3 a\n", nil, "bad size"},
		{"huge size", "SHA256:\n " + sum + " 99999999999999999999 a\n", nil, "bad size"},
		{"escaping path", "SHA256:\n " + sum + " 3 ../a\n", nil, "clean relative path"},
		{"not a field", "garbage\n", nil, "neither a field"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseReleaseSHA256([]byte(tc.in))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("entry %d = %+v, want %+v", i, got[i], tc.want[i])
				}
			}
		})
	}
}

func FuzzParseReleaseSHA256(f *testing.F) {
	sum := strings.Repeat("0f", 32)
	for _, s := range []string{
		"Origin: x\nSHA256:\n " + sum + " 10 main/binary-amd64/Packages\n",
		"SHA256:\n " + sum + " 3 a\n " + sum + " 4 a\n",
		"sha256:\n\t" + sum + " 0 a/b\n\nSHA256:\n",
		"SHA256:\r\n " + sum + " 1 x\r\n",
		"",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		entries, err := parseReleaseSHA256(data)
		if err != nil {
			return
		}
		seen := map[string]bool{}
		for _, e := range entries {
			if len(e.SHA256) != 64 || e.Size < 0 || e.Path == "" || strings.HasPrefix(e.Path, "/") || seen[e.Path] {
				t.Fatalf("accepted a bad entry %+v", e)
			}
			seen[e.Path] = true
		}
	})
}
