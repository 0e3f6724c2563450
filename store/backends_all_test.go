//go:build allbackends

package store_test

import (
	"slices"
	"testing"

	"github.com/armor-apt/armor/store"
)

// TestBackendsAll: a build with -tags allbackends (make build-all, deb, dist) lists
// every rclone backend, the ones the default build lacks among them.
func TestBackendsAll(t *testing.T) {
	got := store.Backends()
	for _, want := range []string{"local", "s3", "gcs", "azureblob", "b2", "sftp", "swift"} {
		if !slices.Contains(got, want) {
			t.Errorf("Backends() = %q, want %s among them", got, want)
		}
	}
	if !store.AllBackends() {
		t.Error("AllBackends() is false in a build with -tags allbackends")
	}
}
