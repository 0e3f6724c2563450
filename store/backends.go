package store

import (
	"slices"

	"github.com/rclone/rclone/fs"
)

// Backends returns the rclone backends this binary carries, sorted, each by the name a
// connection string gives it (":gcs:bucket", ":s3,provider=...:bucket"): the default
// build's local and s3 (and crypt, which rclone's operations package brings), or with
// -tags allbackends every one of rclone's.
func Backends() []string {
	out := make([]string, 0, len(fs.Registry))
	for _, r := range fs.Registry {
		out = append(out, r.Prefix)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// AllBackends reports whether the binary was built with every rclone backend
// (-tags allbackends, as make build-all, make deb and make dist build it).
func AllBackends() bool { return allBackends }
