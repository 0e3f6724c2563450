// Package client is the Go client of controld's HTTP API (/v1), used by the armor CLI.
// Every endpoint has a method; an error answer comes back as *APIError, which matches
// the sentinels ErrConflict, ErrNotFound, ErrUnauthorized and ErrForbidden with
// errors.Is.
package client
