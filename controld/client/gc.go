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

// ReportMissing tells controld of objects a store check found missing from the store or
// damaged there (push). controld checks each again and answers which it found gone
// (now in the repository's known-missing set, so that no release using them is
// recorded while they are gone) and which present.
func (c *Client) ReportMissing(ctx context.Context, repo string, objs []api.ObjectRef) (*api.MissingReportResponse, error) {
	var out api.MissingReportResponse
	return &out, c.do(ctx, http.MethodPost, repoPath(repo, "missing"), api.MissingReportRequest{Objects: objs}, &out)
}

// Missing returns the repository's known-missing set.
func (c *Client) Missing(ctx context.Context, repo string) ([]api.MissingObject, error) {
	var out []api.MissingObject
	return out, c.do(ctx, http.MethodGet, repoPath(repo, "missing"), nil, &out)
}
