//go:build !allbackends

package store_test

import (
	"slices"
	"testing"

	"github.com/armor-apt/armor/store"
)

// TestBackendsDefault: the default build carries local and s3, says it lacks the others,
// and lists no backend it cannot open.
func TestBackendsDefault(t *testing.T) {
	got := store.Backends()
	for _, want := range []string{"local", "s3"} {
		if !slices.Contains(got, want) {
			t.Errorf("Backends() = %q, want %s among them", got, want)
		}
	}
	for _, lacks := range []string{"gcs", "azureblob", "sftp"} {
		if slices.Contains(got, lacks) {
			t.Errorf("Backends() = %q lists %s, which the default build lacks", got, lacks)
		}
	}
	if store.AllBackends() {
		t.Error("AllBackends() is true in the default build")
	}
}
