// Package api holds the JSON types of controld's HTTP API (/v1) and the routes feed's
// long poll, shared by the server (package controld), its Go client (package
// controld/client) and edged, which imports nothing else of controld.
//
// The wire format is documented in controld/API.md; routes.go defines the routes feed.
package api
