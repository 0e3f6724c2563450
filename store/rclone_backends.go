package store

// The default build carries the backends most stores use; rclone_all.go adds every
// other one under the allbackends build tag.
import (
	_ "github.com/rclone/rclone/backend/local"
	_ "github.com/rclone/rclone/backend/s3"
)

// allBackends is true in a build with every rclone backend (rclone_all.go).
var allBackends = false
