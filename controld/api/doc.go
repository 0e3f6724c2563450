// Package api holds the JSON types of controld's HTTP API (/v1), shared by the server
// (package controld) and the Go client (package controld/client).
//
// The wire format is documented in controld/API.md. Edges do not import this package:
// they decode the routes feed with their own types, per the routes-feed contract.
package api
