package publish

import (
	"context"
	"fmt"

	"github.com/armor-apt/armor/controld/client"
	"github.com/armor-apt/armor/manifest"
	"github.com/armor-apt/armor/store"
)

// ActiveManifest returns the manifest of repo's active release, read from the store by
// the digest controld recorded for it; nil when no release is active.
func ActiveManifest(ctx context.Context, c *client.Client, s store.Store, repo string) (*manifest.Manifest, error) {
	st, err := c.Status(ctx, repo)
	if err != nil {
		return nil, fmt.Errorf("active release of %s: %w", repo, err)
	}
	if st.Active == nil {
		return nil, nil
	}
	m, err := FetchManifest(ctx, s, st.Active.Manifest)
	if err != nil {
		return nil, fmt.Errorf("active release %s of %s: %w", st.Active.Release, repo, err)
	}
	if m.ID != st.Active.Release || m.Repository != repo {
		return nil, fmt.Errorf("active release %s of %s: the store's manifest object %s is release %s of %s", st.Active.Release, repo, st.Active.Manifest, m.ID, m.Repository)
	}
	return m, nil
}

// RecordedManifest returns the manifest of a release controld recorded, read from the
// store.
func RecordedManifest(ctx context.Context, c *client.Client, s store.Store, repo, id string) (*manifest.Manifest, error) {
	r, err := c.Release(ctx, repo, id)
	if err != nil {
		return nil, fmt.Errorf("release %s of %s: %w", id, repo, err)
	}
	m, err := FetchManifest(ctx, s, r.Manifest)
	if err != nil {
		return nil, fmt.Errorf("release %s of %s: %w", id, repo, err)
	}
	if m.ID != r.ID {
		return nil, fmt.Errorf("release %s of %s: the store's manifest object %s is release %s", id, repo, r.Manifest, m.ID)
	}
	return m, nil
}
