package publish

import (
	"context"
	"errors"
	"fmt"

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
