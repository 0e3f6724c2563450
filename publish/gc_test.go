package publish_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/armor-apt/armor/controld/client"
	"github.com/armor-apt/armor/publish"
	"github.com/armor-apt/armor/store"
)

// TestPushAfterCollection: a push remembers what its last push put in the store and does
// not ask about it again. If the garbage collector removed some of it since (the release
// was never recorded: it lost its race, or was pushed with --store-only), controld
// refuses the release as incomplete; the next push must upload what is missing instead
// of trusting its memory again.
func TestPushAfterCollection(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := store.NewMemory()
	c, url := newControld(t, s)
	p := newPushProject(t, "")
	res, err := publish.Push(ctx, p.options(s, 4)) // store only: nothing recorded
	if err != nil {
		t.Fatal(err)
	}
	// What armor gc does to objects no recorded release references.
	m := loadManifest(t, p.manifestPath())
	gone := m.Packages[0].SHA256
	if err := s.Delete(ctx, gone); err != nil {
		t.Fatal(err)
	}
	_, err = pushRecord(p, s, c, url, true)
	if !errors.Is(err, client.ErrInvalid) || !strings.Contains(err.Error(), gone) {
		t.Fatalf("push of a release whose object was collected = %v; want controld to refuse it naming %s", err, gone[:12])
	}
	again, err := pushRecord(p, s, c, url, true)
	if err != nil {
		t.Fatalf("push again after controld found objects missing: %v", err)
	}
	if !again.Activated || again.Release != res.Release || again.Uploads.Uploaded != 1 {
		t.Errorf("push again: %+v; want the missing object uploaded and the release active", again)
	}
}
