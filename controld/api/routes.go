package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/armor-apt/armor/internal/hostname"
	"github.com/armor-apt/armor/manifest"
)

// The routes feed is what every edge serves: each repository's hostnames, its active
// release and the releases retained for by-hash/ and pool/ paths.
//
//	GET /v1/routes                 Authorization: Bearer <read token>
//	    ?wait=<seconds>            with If-None-Match: "<version>": long poll (max 60 s);
//	                               304 if the version did not change in time
//	200 application/json, ETag: "<version>"
//	{"version": 17, "generated_at": "RFC3339", "sites": [{
//	    "repository": "demo", "hostnames": ["apt.example.test"],
//	    "active": {"id": "<release id>", "manifest": "<sha256 of the manifest object>",
//	               "activated_at": "RFC3339"},      (null: the site is not served)
//	    "retained": [{"id": "...", "manifest": "<sha256>", "until": "RFC3339",
//	                  "deactivated_at": "RFC3339"}],
//	    "keys": ["<armored public key>", ...]}]}   (the repository's registered keys)
//
// Both ends of the long poll are here: controld's handler reads a request with
// RoutesWait and RoutesUnchanged and labels its answer with RoutesETag; a reader (the
// Go client, edged) builds its request with NewRoutesRequest and reads the answer with
// ReadRoutes. Unlike request bodies sent to controld, the feed is decoded leniently:
// unknown fields are ignored, so controld can add fields without breaking older
// edges; every field a reader relies on is validated (ParseRoutes).

// Routes is one version of the routes feed.
type Routes struct {
	Version     uint64    `json:"version"` // from 1, growing with every change an edge must see
	GeneratedAt time.Time `json:"generated_at"`
	Sites       []Site    `json:"sites"`
}

// Site is one repository as edges serve it.
type Site struct {
	Repository string       `json:"repository"`
	Hostnames  []string     `json:"hostnames"`
	Active     *RouteActive `json:"active"` // nil: the site is not served
	Retained   []Retained   `json:"retained"`
	// Keys are the repository's registered public keys, armored, in the order they
	// were added: edges serve them as /<repository>-archive-keyring.gpg and .asc.
	Keys []string `json:"keys,omitempty"`
}

// RouteActive is a site's active release.
type RouteActive struct {
	ID          string    `json:"id"`
	Manifest    string    `json:"manifest"` // sha256 of the manifest object
	ActivatedAt time.Time `json:"activated_at"`
}

// MaxRoutesWait is the longest long poll of the routes feed.
const MaxRoutesWait = 60 * time.Second

// MaxRoutesBytes bounds a routes feed body that ReadRoutes accepts.
const MaxRoutesBytes = 64 << 20

// RoutesETag is the ETag of routes version v: the version in decimal, quoted.
func RoutesETag(v uint64) string {
	return `"` + strconv.FormatUint(v, 10) + `"`
}

// RoutesUnchanged reports whether an If-None-Match header names routes version v
// (strong or weak, in a list, or "*"), so that the reader has it already.
func RoutesUnchanged(ifNoneMatch string, v uint64) bool {
	etag := RoutesETag(v)
	for _, t := range strings.Split(ifNoneMatch, ",") {
		t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
		if t == etag || t == "*" {
			return true
		}
	}
	return false
}

// RoutesWait reads the wait parameter of a routes request: 0 when absent, at most
// MaxRoutesWait. Anything but a whole number of seconds is an error naming it.
func RoutesWait(q url.Values) (time.Duration, error) {
	w := q.Get("wait")
	if w == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(w)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("wait=%q: want a number of seconds from 0 to %d", w, int(MaxRoutesWait/time.Second))
	}
	return min(time.Duration(n)*time.Second, MaxRoutesWait), nil
}

// NewRoutesRequest builds the request for the routes feed of the controld at baseURL,
// authenticated with token. With since > 0 (the version the caller has), controld
// answers 304 instead of sending that version again; with a wait as well, it holds the
// request until the version changes or wait passes (rounded to whole seconds, at
// least 1, at most MaxRoutesWait).
func NewRoutesRequest(ctx context.Context, baseURL, token string, since uint64, wait time.Duration) (*http.Request, error) {
	u := strings.TrimRight(baseURL, "/") + "/v1/routes"
	if since > 0 && wait > 0 {
		secs := min(max(int(wait.Round(time.Second)/time.Second), 1), int(MaxRoutesWait/time.Second))
		u += "?wait=" + strconv.Itoa(secs)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("routes request: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "application/json")
	if since > 0 {
		req.Header.Set("If-None-Match", RoutesETag(since))
	}
	return req, nil
}

// ReadRoutes reads controld's answer to a routes request: the routes, validated, on
// 200; notModified on 304; a *StatusError on any other status. It reads resp.Body
// (at most MaxRoutesBytes) and leaves closing it to the caller.
func ReadRoutes(resp *http.Response) (r *Routes, notModified bool, err error) {
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotModified:
		return nil, true, nil
	default:
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return nil, false, &StatusError{Status: resp.StatusCode, Body: body}
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxRoutesBytes+1))
	if err != nil {
		return nil, false, fmt.Errorf("read routes: %w", err)
	}
	if len(data) > MaxRoutesBytes {
		return nil, false, fmt.Errorf("read routes: feed larger than %d bytes", MaxRoutesBytes)
	}
	r, err = ParseRoutes(data)
	return r, false, err
}

// StatusError is an answer to a routes request other than 200 or 304. Body is its
// start: controld's ErrorBody, or whatever a proxy in between sent.
type StatusError struct {
	Status int
	Body   []byte
}

func (e *StatusError) Error() string {
	var b ErrorBody
	if json.Unmarshal(e.Body, &b) == nil && b.Error.Message != "" {
		return fmt.Sprintf("routes: %s (%d %s)", b.Error.Message, e.Status, b.Error.Code)
	}
	return fmt.Sprintf("routes: %d %s", e.Status, http.StatusText(e.Status))
}

// ParseRoutes decodes a routes feed body and validates it: a version from 1, every
// repository named, every release id and manifest a sha256, every hostname valid and
// claimed by one repository only. Hostnames are normalised (hostname.Normalize) in
// place. Unknown fields are ignored.
func ParseRoutes(data []byte) (*Routes, error) {
	var r Routes
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("decode routes feed: %w", err)
	}
	if err := r.validate(); err != nil {
		return nil, fmt.Errorf("routes feed version %d: %w", r.Version, err)
	}
	return &r, nil
}

func (r *Routes) validate() error {
	if r.Version == 0 {
		return errors.New("version 0: controld numbers routes from 1")
	}
	owner := map[string]string{}
	for i := range r.Sites {
		s := &r.Sites[i]
		if s.Repository == "" {
			return fmt.Errorf("site %d: repository is empty", i+1)
		}
		if a := s.Active; a != nil {
			if !manifest.ValidDigest(a.ID) || !manifest.ValidDigest(a.Manifest) {
				return fmt.Errorf("site %s: active release id %q or manifest %q is not a sha256", s.Repository, a.ID, a.Manifest)
			}
		}
		for _, x := range s.Retained {
			if !manifest.ValidDigest(x.ID) || !manifest.ValidDigest(x.Manifest) {
				return fmt.Errorf("site %s: retained release id %q or manifest %q is not a sha256", s.Repository, x.ID, x.Manifest)
			}
		}
		for j, h := range s.Hostnames {
			n, err := hostname.Normalize(h)
			if err != nil {
				return fmt.Errorf("site %s: %w", s.Repository, err)
			}
			if prev, dup := owner[n]; dup {
				return fmt.Errorf("hostname %s is claimed by both %s and %s", n, prev, s.Repository)
			}
			owner[n] = s.Repository
			s.Hostnames[j] = n
		}
	}
	return nil
}
