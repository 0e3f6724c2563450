package store

import (
	"fmt"
	"log/slog"
	"os"
	"sync"

	"github.com/rclone/rclone/fs"
	"github.com/rclone/rclone/fs/config"
	"github.com/rclone/rclone/fs/config/configfile"
)

var (
	configOnce sync.Once
	configErr  error
	logOnce    sync.Once
)

// installRcloneConfig makes the user's rclone.conf readable: $RCLONE_CONFIG if set, else
// rclone's default location. It runs once per process, and only when a store names a
// configured remote.
func installRcloneConfig() error {
	configOnce.Do(func() {
		if path, ok := os.LookupEnv("RCLONE_CONFIG"); ok {
			if err := config.SetConfigPath(path); err != nil {
				configErr = fmt.Errorf("use rclone config %s from RCLONE_CONFIG: %w", path, err)
				return
			}
		}
		configfile.Install()
	})
	return configErr
}

// SetRcloneLogger sends rclone's log messages to h. By default a program using this
// package hears nothing from rclone: the first OpenRclone silences it unless
// SetRcloneLogger was called before.
func SetRcloneLogger(h slog.Handler) {
	logOnce.Do(func() {})
	fs.SetLogger(h)
}

func quietRclone() {
	logOnce.Do(func() { fs.SetLogger(slog.DiscardHandler) })
}
