package keyuri

import (
	"context"
	"errors"
	"strings"
	"testing"
)

func TestOpenRefuses(t *testing.T) {
	ctx := context.Background()
	_, err := Open(ctx, "gcpkms://projects/p/locations/global/keyRings/r/cryptoKeys/k/cryptoKeyVersions/1", nil)
	if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "not supported") {
		t.Errorf("gcpkms: %v", err)
	}
	_, err = Open(ctx, "file:///tmp/key?pin-value=secret", nil)
	if err == nil || strings.Contains(err.Error(), "secret") {
		t.Errorf("not a key URI: %v", err)
	}
	if !HasSecret("pkcs11:token=a;object=b?module-path=/m.so&pin-value=1") || HasSecret("pkcs11:token=a;object=b?module-path=/m.so") {
		t.Error("HasSecret")
	}
}
