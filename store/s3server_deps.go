//go:build armor_s3server_deps

package store

// The S3 server the tests run (cmd/s3server) is rclone's own `serve s3`. go mod tidy
// does not look inside testdata/, so this file, never built, names what that server
// imports and keeps those modules in go.mod.
import (
	_ "github.com/rclone/rclone/cmd"
	_ "github.com/rclone/rclone/cmd/serve/s3"
	_ "github.com/rclone/rclone/lib/atexit"
)
