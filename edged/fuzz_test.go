package edged

import (
	"bytes"
	"io"
	"os"
	"testing"

	"github.com/ProtonMail/go-crypto/openpgp/armor"

	"github.com/armor-apt/armor/internal/hostname"
	"github.com/armor-apt/armor/manifest"
)

// FuzzHost: the edge's Host normalisation agrees exactly with hostname.Normalize (the
// normaliser controld applies to hostnames), fast path or not.
func FuzzHost(f *testing.F) {
	for _, s := range []string{
		"apt.example.test", "APT.Example.TEST.:8080", "a-b.c", "a--b.c", "xn--bcher-kva.example",
		"bücher.example", "[::1]:80", "127.0.0.1:8080", "a..b", ".a", "a.", "-a.b", "a-.b",
		"a_b.c", "host:", ":80", "a b", "a\x00b", "x:1:2", "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := appendHost(nil, []byte(s))
		want, werr := hostname.Normalize(s)
		if (err != nil) != (werr != nil) || (err == nil && string(got) != want) {
			t.Fatalf("appendHost(%q) = %q, %v; hostname.Normalize gives %q, %v", s, got, err, want, werr)
		}
		if err == nil {
			again, err := appendHost(nil, got)
			if err != nil || string(again) != string(got) {
				t.Fatalf("not idempotent: %q -> %q -> %q, %v", s, got, again, err)
			}
		}
	})
}

// FuzzPath: a cleaned path is always a valid manifest path (never leaves the tree),
// and cleaning is stable.
func FuzzPath(f *testing.F) {
	for _, s := range []string{
		"/dists/stable/InRelease", "/../etc/passwd", "/%2e%2e/x", "/a%2fb", "//a", "/a/", "/a%zz",
		"/pool/main/h/hello/hello_1.0%7erc1_amd64.deb", "/a/./b", "/%", "", "x", "/\\", "/a%00", "/", "//", "/a//b/", "/a/.//",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, dir, status := CleanPath(s)
		switch status {
		case 0:
			if (got != "" || !dir) && !manifest.ValidPath(got) {
				t.Fatalf("CleanPath(%q) = %q, not a valid tree path", s, got)
			}
			again, againDir, st := CleanPath("/" + got)
			if st != 0 || again != got || (againDir != (got == "")) {
				t.Fatalf("CleanPath(%q) = %q, but CleanPath(/%s) = %q, dir %v, %d", s, got, got, again, againDir, st)
			}
		case 400:
			if got != "" {
				t.Fatalf("CleanPath(%q) = %q with status %d", s, got, status)
			}
		default:
			t.Fatalf("CleanPath(%q): status %d", s, status)
		}
	})
}

// FuzzCleanPathFast: the handler's copy-free cleanPath gives exactly appendCleanPath's
// answer.
func FuzzCleanPathFast(f *testing.F) {
	for _, s := range []string{
		"/dists/stable/InRelease", "/pool/main/h/hello/hello_1_amd64.deb", "/../etc/passwd",
		"/%2e%2e/x", "/a%2fb", "//a", "/a/", "/a/./b", "/a/../b", "/.", "/..", "/...", "/a\\b",
		"/a\x01b", "/a\x7fb", "//a\\", "/a//b/..", "/", "", "x", "/%", "/a%41", "//", "/a/", "/a//", "/a/.//b", "///a%41//",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var buf [16]byte
		got, dir, status := cleanPath(buf[:0], []byte(s))
		want, wantDir, wantStatus := appendCleanPath(nil, []byte(s))
		if status != wantStatus || (status == 0 && (string(got) != string(want) || dir != wantDir)) {
			t.Fatalf("cleanPath(%q) = %q, dir %v, %d; appendCleanPath gives %q, dir %v, %d", s, got, dir, status, want, wantDir, wantStatus)
		}
	})
}

// FuzzKeyringRoutes: whatever keys the routes feed carries, the edge either serves a
// binary keyring and its armored copy holding the same bytes, or nothing, and says why.
func FuzzKeyringRoutes(f *testing.F) {
	for _, p := range []string{"../testdata/keys/rsa.pub.asc", "../testdata/keys/eddsa.pub.asc"} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b), "")
		f.Add(string(b), string(b[:len(b)/2]))
	}
	f.Add("-----BEGIN PGP PUBLIC KEY BLOCK-----\n\n=AAAA\n-----END PGP PUBLIC KEY BLOCK-----\n", "x")
	f.Fuzz(func(t *testing.T, a, b string) {
		routes, err := keyringRoutes("demo", []string{a, b})
		if routes == nil {
			if err == nil {
				t.Fatal("no keyring and no error")
			}
			return
		}
		bin, asc := routes["demo-archive-keyring.gpg"], routes["demo-archive-keyring.asc"]
		if bin == nil || asc == nil || len(bin.body) == 0 {
			t.Fatalf("keyring routes %v", routes)
		}
		blk, err := armor.Decode(bytes.NewReader(asc.body))
		if err != nil {
			t.Fatalf("served .asc does not decode: %v", err)
		}
		got, err := io.ReadAll(blk.Body)
		if err != nil || !bytes.Equal(got, bin.body) {
			t.Fatalf("served .asc holds other bytes than .gpg (%v)", err)
		}
	})
}
