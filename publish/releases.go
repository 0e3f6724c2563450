package publish

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/armor-apt/armor/controld/client"
	"github.com/armor-apt/armor/manifest"
	"github.com/armor-apt/armor/store"
)

// ActiveManifest returns the manifest of repo's active release, read from the store by
// the digest controld recorded for it; nil when no release is active.
func ActiveManifest(ctx context.Context, c *client.Client, s store.Store, repo string) (*manifest.Manifest, error) {
	st, err := c.Status(ctx, repo)
	if err != nil {
		return nil, fmt.Errorf("status of %s: %w", repo, err)
	}
	if st.Active == nil {
		return nil, nil
	}
	return FetchRelease(ctx, s, RecordedRelease{st.Active.Release, st.Active.Manifest})
}

// RecordedManifest returns the manifest of the release of repo whose id is id, read from
// the store.
func RecordedManifest(ctx context.Context, c *client.Client, s store.Store, repo, id string) (*manifest.Manifest, error) {
	r, err := c.Release(ctx, repo, id)
	if err != nil {
		return nil, fmt.Errorf("release %s of %s: %w", id, repo, err)
	}
	return FetchRelease(ctx, s, RecordedRelease{r.ID, r.Manifest})
}

// RecordedRelease names a release recorded in controld: its id and the digest of its
// manifest object in the store.
type RecordedRelease struct {
	ID, Manifest string
}

// FindRelease returns the release of repo recorded in controld whose id is id, or the
// one release whose id starts with id. No such release, or several, is an error that
// names id and the repository.
func FindRelease(ctx context.Context, c *client.Client, repo, id string) (RecordedRelease, error) {
	rels, err := c.Releases(ctx, repo)
	if err != nil {
		return RecordedRelease{}, fmt.Errorf("list the releases of %s: %w", repo, err)
	}
	var match []RecordedRelease
	for _, r := range rels {
		if strings.HasPrefix(r.ID, id) {
			match = append(match, RecordedRelease{r.ID, r.Manifest})
		}
	}
	switch len(match) {
	case 1:
		return match[0], nil
	case 0:
		return RecordedRelease{}, fmt.Errorf("release %s: repository %s has no recorded release whose id starts with it (armor releases list)", id, repo)
	}
	ids := make([]string, len(match))
	for i, r := range match {
		ids[i] = short(r.ID)
	}
	return RecordedRelease{}, fmt.Errorf("release %s is ambiguous: %d recorded releases of %s start with it (%s); give more of its id",
		id, len(match), repo, strings.Join(ids, ", "))
}

// ActiveRelease returns repo's active release; none active is an error.
func ActiveRelease(ctx context.Context, c *client.Client, repo string) (RecordedRelease, error) {
	st, err := c.Status(ctx, repo)
	if err != nil {
		return RecordedRelease{}, fmt.Errorf("status of %s: %w", repo, err)
	}
	if st.Active == nil {
		return RecordedRelease{}, fmt.Errorf("repository %s has no active release (armor status)", repo)
	}
	return RecordedRelease{st.Active.Release, st.Active.Manifest}, nil
}

// FetchRelease reads a recorded release's manifest from the store by its digest and
// checks that it is that release's.
func FetchRelease(ctx context.Context, s store.Store, r RecordedRelease) (*manifest.Manifest, error) {
	m, err := FetchManifest(ctx, s, r.Manifest)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("release %s: its manifest is missing from store %s: %w", r.ID, s, err)
	}
	if err != nil {
		return nil, fmt.Errorf("release %s: %w", r.ID, err)
	}
	if m.ID != r.ID {
		return nil, fmt.Errorf("release %s: its manifest object %s in store %s holds release %s", r.ID, r.Manifest, s, m.ID)
	}
	return m, nil
}
