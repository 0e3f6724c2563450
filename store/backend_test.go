//go:build !allbackends

package store_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/armor-apt/armor/store"
)

// TestMissingBackend: a remote whose rclone backend this build lacks, given as a
// connection string, fails naming the backend and the build that has it; a backend the
// build has still opens. (A configured remote's case is in TestRcloneConfiguredRemotes,
// which owns the process's one reading of rclone.conf.)
func TestMissingBackend(t *testing.T) {
	for remote, backend := range map[string]string{":gcs:bucket/prefix": "gcs", ":azureblob,account=x:container": "azureblob"} {
		_, err := store.OpenRclone(context.Background(), remote)
		if !errors.Is(err, store.ErrBackendMissing) {
			t.Errorf("%s: error %v, want ErrBackendMissing", remote, err)
			continue
		}
		for _, want := range []string{`"` + backend + `"`, "make build-all", "allbackends"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: error %q does not say %q", remote, err, want)
			}
		}
	}
	if _, err := store.OpenRclone(context.Background(), ":local:"+t.TempDir()); err != nil {
		t.Errorf("the local backend, compiled in: %v", err)
	}
}
