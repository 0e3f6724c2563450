package client

import (
	"context"
	"net/http"

	"github.com/armor-apt/armor/controld/api"
)

// DeleteRelease forgets a recorded release (admin). controld refuses, with an *APIError
// matching ErrConflict and code api.CodeKept, a release that is active, retained within
// the retention window, or what a rollback would activate. Its objects leave the store
// at the next garbage collection.
func (c *Client) DeleteRelease(ctx context.Context, repo, id string) (*api.Release, error) {
	var out api.Release
	return &out, c.do(ctx, http.MethodDelete, repoPath(repo, "releases", id), nil, &out)
}

// GC runs a garbage collection of the store (admin on every repository), or with
// dryRun reports what one would delete.
func (c *Client) GC(ctx context.Context, dryRun bool) (*api.GCReport, error) {
	var out api.GCReport
	return &out, c.do(ctx, http.MethodPost, "/v1/gc", api.GCRequest{DryRun: dryRun}, &out)
}
