package publish

import (
	"context"

	"github.com/armor-apt/armor/controld/api"
	"github.com/armor-apt/armor/controld/client"
)

// DeleteRelease forgets the recorded release of repo that release names (its id or a
// unique prefix of it). controld refuses the active release, the one a rollback would
// activate and those inside the retention window (an *client.APIError with code
// api.CodeKept saying which). The release's objects leave the store at the next garbage
// collection (GC), once no kept release shares them.
func DeleteRelease(ctx context.Context, c *client.Client, repo, release string) (*api.Release, error) {
	id, err := resolveRelease(ctx, c, repo, release)
	if err != nil {
		return nil, err
	}
	return c.DeleteRelease(ctx, repo, id)
}

// GC asks controld to collect the store's garbage (every repository's: the store is
// shared), or with dryRun to report what it would delete. controld holds the store and
// the state, and excludes recordings while it deletes, so the collection runs there.
func GC(ctx context.Context, c *client.Client, dryRun bool) (*api.GCReport, error) {
	return c.GC(ctx, dryRun)
}
