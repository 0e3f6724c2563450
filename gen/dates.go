package gen

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/armor-apt/armor/debian/release"
	"github.com/armor-apt/armor/manifest"
)

// Dates a release must not be signed with. apt cannot order two Release files of one
// Date and refuses one whose Valid-Until has passed; controld refuses to activate a
// release not newer than the active one, or expired. So a build is always dated after
// its parent, and one that would be expired at once fails before it writes anything.

// ErrDate is wrapped by the errors of settleDates.
var ErrDate = errors.New("build date")

// settleDates dates the build a second after its parent when its date is not later:
// two builds within one second, a runner whose clock is behind the parent's, or a
// SOURCE_DATE_EPOCH (or armor.toml date) that a chain of builds keeps fixed. The date
// still follows from the inputs alone, the parent among them, so a build repeated
// gives the same bytes; Result.Manifest.Date is the date it took. It refuses a build
// whose Valid-Until (the date plus a suite's ValidFor) has passed by o.Now.
func settleDates(o *Options, parent *manifest.Manifest) error {
	date := o.Date.UTC().Truncate(time.Second)
	if parent != nil {
		if pd, err := time.Parse(time.RFC3339, parent.Date); err == nil && !date.After(pd) {
			date = pd.Add(time.Second)
		}
	}
	o.Date = date
	now := o.now()
	for _, s := range o.Suites {
		if s.ValidFor <= 0 {
			continue
		}
		if until := date.Add(s.ValidFor); !until.After(now) {
			return fmt.Errorf("%w: suite %s would be valid until %s (the build date %s plus valid_for %s), which has passed: apt would refuse it as expired; the build date is SOURCE_DATE_EPOCH, or armor.toml's date, when set: set it to a recent time (after %d), or raise valid_for",
				ErrDate, s.Codename, release.FormatDate(until), release.FormatDate(date), s.ValidFor, now.Add(-s.ValidFor).Unix())
		}
	}
	return nil
}

// maxDateWait bounds waitForDate: a date further ahead of the clock is the runner's clock
// or SOURCE_DATE_EPOCH, not two builds within a second, and waiting would not help.
const maxDateWait = 2 * time.Second

// waitForDate waits, when date is ahead of the real clock by at most maxDateWait (a
// build moved a second after a parent of the same second), until the clock reaches it:
// a signature made in the future fails verification (go-crypto, so controld, says it
// has expired) until then. It returns early with ctx's error.
func waitForDate(ctx context.Context, date time.Time) error {
	d := time.Until(date)
	if d <= 0 || d > maxDateWait {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// now is the wall clock of the build, for Valid-Until.
func (o *Options) now() time.Time {
	if o.Now != nil {
		return o.Now()
	}
	return time.Now()
}

// expired reports whether a Release's Valid-Until has passed by now.
func expired(data []byte, now time.Time) bool {
	f, err := release.Parse(data)
	if err != nil {
		return false
	}
	until, err := f.ValidUntil()
	return err == nil && !until.IsZero() && !until.After(now)
}
