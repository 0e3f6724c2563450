package edged

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/armor-apt/armor/internal/hostname"
	"github.com/armor-apt/armor/manifest"
)

// The routes feed, as controld serves it (the contract agreed with controld):
//
//	GET /v1/routes                 Authorization: Bearer <read token>
//	    ?wait=<seconds>            with If-None-Match: "<version>": long poll (max 60 s);
//	                               304 if the version did not change in time
//	200 application/json, ETag: "<version>"
//	{"version": 17, "generated_at": "RFC3339", "sites": [{
//	    "repository": "demo", "hostnames": ["apt.example.test"],
//	    "active": {"id": "<release id>", "manifest": "<sha256 of the manifest object>",
//	               "activated_at": "RFC3339"},      (null: the site is not served)
//	    "retained": [{"id": "...", "manifest": "<sha256>", "until": "RFC3339"}]}]}
//
// Unknown fields are ignored, so controld can add fields without breaking older edges;
// every field the edge relies on is validated.

// Feed is one version of the routes feed.
type Feed struct {
	Version     int64      `json:"version"`
	GeneratedAt time.Time  `json:"generated_at"`
	Sites       []FeedSite `json:"sites"`
}

// FeedSite is one repository's routes.
type FeedSite struct {
	Repository string            `json:"repository"`
	Hostnames  []string          `json:"hostnames"`
	Active     *ActiveRelease    `json:"active"`
	Retained   []RetainedRelease `json:"retained"`
}

// ActiveRelease is a repository's active release.
type ActiveRelease struct {
	ID          string    `json:"id"`
	Manifest    string    `json:"manifest"`
	ActivatedAt time.Time `json:"activated_at"`
}

// RetainedRelease is a release that was active within the retention window; its
// by-hash/ and pool/ paths are served until Until.
type RetainedRelease struct {
	ID       string    `json:"id"`
	Manifest string    `json:"manifest"`
	Until    time.Time `json:"until"`
}

// ParseFeed decodes and validates a routes feed body.
func ParseFeed(data []byte) (*Feed, error) {
	var f Feed
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("decode routes feed: %w", err)
	}
	if err := f.validate(); err != nil {
		return nil, fmt.Errorf("routes feed version %d: %w", f.Version, err)
	}
	return &f, nil
}

// validate checks digests and hostnames, normalises hostnames in place, and rejects a
// hostname claimed twice (naming both claims).
func (f *Feed) validate() error {
	owner := map[string]string{}
	for i := range f.Sites {
		s := &f.Sites[i]
		if s.Repository == "" {
			return fmt.Errorf("site %d: repository is empty", i+1)
		}
		if a := s.Active; a != nil {
			if !manifest.ValidDigest(a.ID) || !manifest.ValidDigest(a.Manifest) {
				return fmt.Errorf("site %s: active release id %q or manifest %q is not a sha256", s.Repository, a.ID, a.Manifest)
			}
		}
		for _, r := range s.Retained {
			if !manifest.ValidDigest(r.ID) || !manifest.ValidDigest(r.Manifest) {
				return fmt.Errorf("site %s: retained release id %q or manifest %q is not a sha256", s.Repository, r.ID, r.Manifest)
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
