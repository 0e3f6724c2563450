package publish

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/armor-apt/armor/controld/api"
	"github.com/armor-apt/armor/controld/client"
)

// RecordOptions say which release Record hands to controld.
type RecordOptions struct {
	URL      string // controld's URL, named in errors
	Repo     string
	Release  string // the release's id
	Manifest string // the digest of its manifest, an object already in the store
	// Activate also makes the release active, provided the release active when Record
	// starts is still active then (compare-and-swap).
	Activate bool
}

// Record records a release in controld and, if asked, activates it. A release that is
// already active is recorded again without a flip. It reports whether the release is
// active afterwards. Errors name controld; a missing repository or a lost
// compare-and-swap (client.ErrConflict) says what to do about it.
func Record(ctx context.Context, c *client.Client, o RecordOptions) (activated bool, err error) {
	expect := ""
	if o.Activate {
		st, err := c.Status(ctx, o.Repo)
		if err != nil {
			return false, controldError(o.URL, o.Repo, err)
		}
		if st.Active != nil {
			expect = st.Active.Release
		}
	}
	already := o.Activate && expect == o.Release
	if already || !o.Activate {
		expect = ""
	}
	rr, err := c.RecordRelease(ctx, o.Repo, o.Manifest, o.Activate && !already, expect)
	if err != nil {
		return false, controldError(o.URL, o.Repo, err)
	}
	return rr.Activation != nil || already, nil
}

// controldError says which controld failed and, where it can, what to do about it.
func controldError(url, repo string, err error) error {
	var ae *client.APIError
	if errors.As(err, &ae) && ae.Status == 404 {
		return fmt.Errorf("controld %s: %w (create the repository with `armor repos create`)", url, err)
	}
	if errors.Is(err, client.ErrConflict) {
		return fmt.Errorf("controld %s: repository %s: %w; someone activated another release meanwhile: check `armor status` and push again", url, repo, err)
	}
	return fmt.Errorf("controld %s: %w", url, err)
}

// Activate makes a recorded release of repo active. release may be a unique prefix of
// the release's id. expect is the release that must still be active for the flip to
// happen (compare-and-swap); when empty, it is whatever is active when Activate starts.
func Activate(ctx context.Context, c *client.Client, repo, release, expect string) (*api.Activation, error) {
	id, err := resolveRelease(ctx, c, repo, release)
	if err != nil {
		return nil, err
	}
	if expect == "" {
		st, err := c.Status(ctx, repo)
		if err != nil {
			return nil, err
		}
		if st.Active != nil {
			expect = st.Active.Release
		}
	}
	return c.Activate(ctx, repo, id, expect)
}

// resolveRelease returns the id of the one recorded release of repo that id is a prefix
// of; a full id is taken as it is.
func resolveRelease(ctx context.Context, c *client.Client, repo, id string) (string, error) {
	if len(id) >= 64 {
		return id, nil
	}
	rels, err := c.Releases(ctx, repo)
	if err != nil {
		return "", err
	}
	var match []string
	for _, r := range rels {
		if strings.HasPrefix(r.ID, id) {
			match = append(match, r.ID)
		}
	}
	if len(match) != 1 {
		return "", fmt.Errorf("release %q matches %d recorded releases of %s; give more of its id", id, len(match), repo)
	}
	return match[0], nil
}
