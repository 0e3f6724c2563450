package gen

import (
	"errors"
	"testing"
	"time"

	"github.com/armor-apt/armor/manifest"
)

// TestRebaseDatedAfterParent: a rebase asked for a date older than its new parent's (the
// pipeline that lost the race had an older commit's SOURCE_DATE_EPOCH) is dated a second
// after the parent and records what it asked for; the same build not a rebase is refused.
func TestRebaseDatedAfterParent(t *testing.T) {
	parent := &manifest.Manifest{ID: "active", Date: "2026-03-01T10:00:05Z", RequestedDate: "2026-03-01T10:00:00Z"}
	asked := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	if _, err := dateAfter(asked, DateFromEnv, false, parent); !errors.Is(err, ErrDate) {
		t.Fatalf("a build asked for a date older than its parent's: %v, want ErrDate", err)
	}
	o := &Options{Date: asked, DateSource: DateFromEnv, Rebase: true}
	requested, err := settleDates(o, parent)
	if err != nil {
		t.Fatalf("the rebase was refused: %v", err)
	}
	if want := time.Date(2026, 3, 1, 10, 0, 6, 0, time.UTC); !o.Date.Equal(want) || requested != "2026-03-01T09:00:00Z" {
		t.Errorf("the rebase is dated %s with requested_date %q, want %s and 2026-03-01T09:00:00Z", o.Date, requested, want)
	}
}
