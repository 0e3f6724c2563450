package base

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestBookwormThroughAPTLine(t *testing.T) {
	src, err := Parse(aptSource(t), "")
	if err != nil {
		t.Fatal(err)
	}
	l := &Loader{Cache: testCache(t)}
	pkgs, err := l.Load(context.Background(), src, "amd64")
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) < 60000 {
		t.Fatalf("bookworm main amd64 has %d packages", len(pkgs))
	}
}

func TestParseSpecs(t *testing.T) {
	for _, c := range []struct {
		spec, err string
	}{
		{"deb [signed-by=k.gpg arch=amd64] http://mirror/debian bookworm main contrib", ""},
		{"deb file:/srv/repo ./", ""},
		{"https://mirror/debian/dists/bookworm/main/binary-amd64/Packages.xz", ""},
		{"bases/Packages.gz", ""},
		{"deb http://mirror/debian bookworm", "give components after a suite"},
		{"deb http://mirror/debian ./ main", "give components after a suite"},
		{"deb [signed-by=k.gpg http://mirror/debian bookworm main", "closing"},
		{"deb [colour=blue] http://mirror/debian bookworm main", "unknown option"},
		{"deb ftp://mirror/debian bookworm main", "http, https or file"},
		{"deb http://mirror/debian", "needs a URI and a suite"},
		{"  ", "empty"},
	} {
		_, err := Parse(c.spec, "/project")
		if c.err == "" && err != nil || c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
			t.Errorf("Parse(%q) = %v, want an error with %q", c.spec, err, c.err)
		}
	}
	s, _ := Parse("deb [signed-by=k.gpg] http://mirror/debian/ bookworm main", "/project")
	if s.uri != "http://mirror/debian" || s.keyrings[0] != "/project/k.gpg" || s.components[0] != "main" {
		t.Errorf("parsed %+v", s)
	}
}

func FuzzParse(f *testing.F) {
	f.Add("deb [signed-by=k.gpg] http://mirror/debian bookworm main")
	f.Add("Packages.xz")
	f.Fuzz(func(t *testing.T, spec string) {
		_, _ = Parse(spec, "/project")
	})
}

// TestURLFetchedOnce: a Packages file named by URL is fetched once, then asked for with
// its validators (304 serves the kept copy), and a failed fetch falls back to the kept
// copy with a warning.
func TestURLFetchedOnce(t *testing.T) {
	const index = "Package: libc6\nVersion: 2.36-9\nArchitecture: amd64\n"
	var gets, conditional int
	down := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gets++
		if down {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		if r.Header.Get("If-None-Match") == `"v1"` {
			conditional++
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Header().Set("ETag", `"v1"`)
		io.WriteString(w, index)
	}))
	defer srv.Close()
	var warned []error
	l := &Loader{Cache: t.TempDir(), Warn: func(err error) { warned = append(warned, err) }}
	src, err := Parse(srv.URL+"/Packages", "")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if i == 2 {
			down = true
		}
		pkgs, err := l.Load(context.Background(), src, "amd64")
		if err != nil || len(pkgs) != 1 || pkgs[0].Name != "libc6" {
			t.Fatalf("load %d: %v %+v", i, err, pkgs)
		}
	}
	if gets != 3 || conditional != 1 || len(warned) != 1 || !strings.Contains(warned[0].Error(), "503") {
		t.Fatalf("%d requests, %d conditional, warnings %v", gets, conditional, warned)
	}
	// Without a kept copy, a failed fetch is an error that names the base.
	l2 := &Loader{Cache: t.TempDir()}
	if _, err := l2.Load(context.Background(), src, "amd64"); err == nil || !strings.Contains(err.Error(), srv.URL) {
		t.Fatalf("load without a copy from a server that is down: %v", err)
	}
}
