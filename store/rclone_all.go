//go:build allbackends

package store

// Built with -tags allbackends, the store can use every rclone backend (GCS, Azure, B2,
// sftp, ...), at the cost of a larger binary and a slower build.
import _ "github.com/rclone/rclone/backend/all"

func init() { allBackends = true }
