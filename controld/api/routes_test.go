package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/armor-apt/armor/controld/api"
)

var (
	sumA = strings.Repeat("a", 64)
	sumB = strings.Repeat("b", 64)
)

// site is a routes feed site in JSON, with an active release unless active is "".
func site(repo, hosts, active string) string {
	a := "null"
	if active != "" {
		a = `{"id":"` + active + `","manifest":"` + sumB + `","activated_at":"2026-11-22T08:00:00Z"}`
	}
	return `{"repository":"` + repo + `","hostnames":[` + hosts + `],"active":` + a + `,"retained":[]}`
}

func feed(version string, sites ...string) string {
	return `{"version":` + version + `,"generated_at":"2026-11-22T08:00:00Z","sites":[` + strings.Join(sites, ",") + `]}`
}

func TestParseRoutes(t *testing.T) {
	tests := []struct {
		name, body string
		err        string // "" for valid
	}{
		{"valid", feed("3", site("demo", `"apt.example.test"`, sumA), site("idle", `"b.test"`, "")), ""},
		{"unknown fields are ignored", `{"version":3,"mirrors":["x"],"sites":[{"repository":"demo","hostnames":[],"active":null,"weight":1}]}`, ""},
		{"version 0", feed("0"), "version 0"},
		{"negative version", feed("-1"), "decode routes feed"},
		{"not JSON", `<html>`, "decode routes feed"},
		{"no repository", feed("3", site("", `"a.test"`, sumA)), "site 1: repository is empty"},
		{"active id not a sha256", feed("3", site("demo", `"a.test"`, "v1")), `active release id "v1"`},
		{"retained manifest not a sha256", `{"version":3,"sites":[{"repository":"demo","retained":[{"id":"` + sumA + `","manifest":"` + strings.ToUpper(sumB) + `"}]}]}`, "retained release"},
		{"invalid hostname", feed("3", site("demo", `"a_b.test"`, sumA)), "site demo"},
		{"hostname claimed twice names both", feed("3", site("demo", `"a.test"`, sumA), site("other", `"A.test:80"`, sumA)), "hostname a.test is claimed by both demo and other"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := api.ParseRoutes([]byte(tc.body))
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("ParseRoutes: %v; want it valid", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("ParseRoutes = %+v, %v; want an error containing %q", r, err, tc.err)
			}
		})
	}
}

func TestParseRoutesNormalisesHostnames(t *testing.T) {
	r, err := api.ParseRoutes([]byte(feed("3", site("demo", `"APT.Example.TEST.:8080","bücher.example"`, sumA))))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := r.Sites[0].Hostnames, []string{"apt.example.test", "xn--bcher-kva.example"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("hostnames %q; want %q", got, want)
	}
	if r.Version != 3 || r.Sites[0].Active.ID != sumA || r.Sites[0].Active.Manifest != sumB {
		t.Fatalf("routes %+v", r)
	}
}

// FuzzParseRoutes: whatever controld (or something posing as it) sends, ParseRoutes
// either rejects it or returns routes that pass their own validation again once
// encoded, unchanged: edged keeps routes on disk that way and reads them back.
func FuzzParseRoutes(f *testing.F) {
	for _, s := range []string{
		feed("3", site("demo", `"apt.example.test"`, sumA)),
		feed("3", site("demo", `"A.test:80","a.test"`, sumA)),
		feed("1", site("demo", `"bücher.example"`, ""), site("other", `"b.test"`, sumA)),
		`{"version":2,"sites":[{"repository":"x","retained":[{"id":"` + sumA + `","manifest":"` + sumB + `","until":"2026-11-22T08:00:00Z"}]}]}`,
		`{"version":18446744073709551615,"sites":null}`,
		`{}`, `null`, `[]`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := api.ParseRoutes(data)
		if err != nil {
			return
		}
		if r.Version == 0 {
			t.Fatal("accepted version 0")
		}
		enc, err := json.Marshal(r)
		if err != nil {
			t.Fatalf("encode accepted routes: %v", err)
		}
		again, err := api.ParseRoutes(enc)
		if err != nil {
			t.Fatalf("routes accepted, encoded as %s, then rejected: %v", enc, err)
		}
		if !reflect.DeepEqual(normalTimes(again), normalTimes(r)) {
			t.Fatalf("routes changed across encode and parse:\n%+v\n%+v", r, again)
		}
	})
}

// normalTimes makes the times of r comparable with reflect.DeepEqual (their
// locations differ across encoding).
func normalTimes(r *api.Routes) *api.Routes {
	c := *r
	c.GeneratedAt = c.GeneratedAt.UTC()
	c.Sites = append([]api.Site(nil), r.Sites...)
	for i := range c.Sites {
		s := &c.Sites[i]
		if s.Active != nil {
			a := *s.Active
			a.ActivatedAt = a.ActivatedAt.UTC()
			s.Active = &a
		}
		s.Retained = append([]api.Retained(nil), s.Retained...)
		for j := range s.Retained {
			s.Retained[j].Until = s.Retained[j].Until.UTC()
		}
	}
	return &c
}

func TestRoutesUnchanged(t *testing.T) {
	tests := []struct {
		header string
		want   bool
	}{
		{`"7"`, true}, {`W/"7"`, true}, {`"6", "7"`, true}, {`*`, true},
		{`"6"`, false}, {``, false}, {`7`, false}, {`"70"`, false},
	}
	for _, tc := range tests {
		if got := api.RoutesUnchanged(tc.header, 7); got != tc.want {
			t.Errorf("RoutesUnchanged(%q, 7) = %v, want %v", tc.header, got, tc.want)
		}
	}
}

func TestRoutesWait(t *testing.T) {
	tests := []struct {
		query string
		want  time.Duration
		err   bool
	}{
		{"", 0, false}, {"wait=0", 0, false}, {"wait=30", 30 * time.Second, false},
		{"wait=600", api.MaxRoutesWait, false}, {"wait=soon", 0, true}, {"wait=-1", 0, true}, {"wait=1.5", 0, true},
	}
	for _, tc := range tests {
		q, _ := url.ParseQuery(tc.query)
		got, err := api.RoutesWait(q)
		if got != tc.want || (err != nil) != tc.err {
			t.Errorf("RoutesWait(%q) = %s, %v; want %s, error %t", tc.query, got, err, tc.want, tc.err)
		}
	}
}

func TestNewRoutesRequest(t *testing.T) {
	tests := []struct {
		name        string
		since       uint64
		wait        time.Duration
		url, ifNone string
	}{
		{"first fetch", 0, 30 * time.Second, "http://c:1/v1/routes", ""},
		{"conditional", 7, 0, "http://c:1/v1/routes", `"7"`},
		{"long poll", 7, 30 * time.Second, "http://c:1/v1/routes?wait=30", `"7"`},
		{"wait rounded, at least 1s", 7, 400 * time.Millisecond, "http://c:1/v1/routes?wait=1", `"7"`},
		{"wait at most 60s", 7, 5 * time.Minute, "http://c:1/v1/routes?wait=60", `"7"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, err := api.NewRoutesRequest(context.Background(), "http://c:1/", "tok", tc.since, tc.wait)
			if err != nil {
				t.Fatal(err)
			}
			if req.Method != http.MethodGet || req.URL.String() != tc.url {
				t.Errorf("request %s %s; want GET %s", req.Method, req.URL, tc.url)
			}
			if got := req.Header.Get("If-None-Match"); got != tc.ifNone {
				t.Errorf("If-None-Match %q; want %q", got, tc.ifNone)
			}
			if got := req.Header.Get("Authorization"); got != "Bearer tok" {
				t.Errorf("Authorization %q", got)
			}
		})
	}
}

// TestReadRoutes: both ends of the long poll against each other, with a server built
// from RoutesWait, RoutesUnchanged and RoutesETag as controld's is.
func TestReadRoutes(t *testing.T) {
	const version = 8
	body := feed("8", site("demo", `"A.test"`, sumA))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Header.Get("Authorization") != "Bearer tok":
			w.WriteHeader(http.StatusUnauthorized)
			io.WriteString(w, `{"error":{"code":"unauthorized","message":"unknown token"}}`)
			return
		}
		wait, err := api.RoutesWait(r.URL.Query())
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("ETag", api.RoutesETag(version))
		if api.RoutesUnchanged(r.Header.Get("If-None-Match"), version) {
			time.Sleep(wait)
			w.WriteHeader(http.StatusNotModified)
			return
		}
		io.WriteString(w, body)
	}))
	defer srv.Close()
	big := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"version":8,"sites":[],"pad":"`+strings.Repeat("x", api.MaxRoutesBytes)+`"}`)
	}))
	defer big.Close()
	read := func(token string, since uint64, wait time.Duration, base string) (*api.Routes, bool, error) {
		t.Helper()
		req, err := api.NewRoutesRequest(context.Background(), base, token, since, wait)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		return api.ReadRoutes(resp)
	}

	r, notModified, err := read("tok", 0, 0, srv.URL)
	if err != nil || notModified || r.Version != version || r.Sites[0].Hostnames[0] != "a.test" {
		t.Errorf("first fetch: %+v, %t, %v; want version 8 with its hostname normalised", r, notModified, err)
	}
	r, notModified, err = read("tok", 7, time.Second, srv.URL)
	if err != nil || notModified || r == nil || r.Version != version {
		t.Errorf("poll from version 7: %+v, %t, %v; want version 8", r, notModified, err)
	}
	start := time.Now()
	r, notModified, err = read("tok", version, time.Second, srv.URL)
	if err != nil || !notModified || r != nil || time.Since(start) < time.Second {
		t.Errorf("poll from version 8: %+v, %t, %v after %s; want not modified after the 1s wait", r, notModified, err, time.Since(start))
	}
	_, _, err = read("wrong", 0, 0, srv.URL)
	var se *api.StatusError
	if !errors.As(err, &se) || se.Status != http.StatusUnauthorized || !strings.Contains(err.Error(), "unknown token") {
		t.Errorf("refused token: %v; want a *StatusError 401 with controld's message", err)
	}
	if _, _, err = read("tok", 0, 0, big.URL); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("oversized feed: %v; want refused", err)
	}
}
