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
//
// A build asked for a date not after its parent's is dated a second after the parent:
// two builds within one second, or a chain of builds that keeps SOURCE_DATE_EPOCH (or
// armor.toml's date) fixed, as a CI pipeline does that builds, copies and publishes at
// one commit. The manifest then records the date that was asked for (requested_date),
// and the next build may ask for that date again, or a later one; a build asked for a
// date older than that fails: a runner whose clock is behind, or a SOURCE_DATE_EPOCH
// from an older checkout, would otherwise publish as new what is older than the release
// it replaces, silently. A rebase is dated after its new parent whatever it asked for:
// its change is as new as the pipeline that lost the race to publish it.

// ErrDate is wrapped by the errors of settleDates.
var ErrDate = errors.New("build date")

// DateSource is where Options.Date came from: a date refused as older than the parent's
// names it, and the fix that applies to it.
type DateSource int

const (
	DateFromClock   DateSource = iota // this runner's clock (the zero value)
	DateFromEnv                       // SOURCE_DATE_EPOCH
	DateFromConfig                    // armor.toml's date
	DateFromRelease                   // the date a recorded release asked for (armor rebuild)
)

// settleDates sets o.Date to the build's date (see above) and returns the date that was
// asked for when that differs, for the manifest's requested_date ("" otherwise). The date
// follows from the inputs alone, the parent among them, so a build repeated gives the
// same bytes. It refuses a date older than the parent's requested one (ErrDate), and a
// build whose Valid-Until (the date plus a suite's ValidFor) has passed by o.Now.
func settleDates(o *Options, parent *manifest.Manifest) (requested string, err error) {
	asked := o.Date.UTC().Truncate(time.Second)
	date, err := dateAfter(asked, o.DateSource, o.Rebase, parent)
	if err != nil {
		return "", err
	}
	if !date.Equal(asked) {
		requested = asked.Format(time.RFC3339)
	}
	o.Date = date
	now := o.now()
	for _, s := range o.Suites {
		if s.ValidFor <= 0 {
			continue
		}
		if until := date.Add(s.ValidFor); !until.After(now) {
			return "", fmt.Errorf("%w: suite %s would be valid until %s (the build date %s plus valid_for %s), which has passed: apt would refuse it as expired; the build date is SOURCE_DATE_EPOCH, or armor.toml's date, when set: set it to a recent time (after %d), or raise valid_for",
				ErrDate, s.Codename, release.FormatDate(until), release.FormatDate(date), s.ValidFor, now.Add(-s.ValidFor).Unix())
		}
	}
	return requested, nil
}

// dateAfter returns the date of a build asked for date asked (from src) on parent: asked
// when it is after the parent's date, else a second after the parent's date, unless
// asked is older than the date the parent's build asked for, which is an error but for a
// rebase.
func dateAfter(asked time.Time, src DateSource, rebase bool, parent *manifest.Manifest) (time.Time, error) {
	if parent == nil {
		return asked, nil
	}
	pd, err := time.Parse(time.RFC3339, parent.Date)
	if err != nil {
		return asked, nil // not a date armor wrote: nothing to be dated after
	}
	pr := pd
	if t, err := time.Parse(time.RFC3339, parent.RequestedDate); err == nil {
		pr = t
	}
	switch {
	case asked.Before(pr) && !rebase:
		return time.Time{}, olderThanParent(asked, src, parent, pd, pr)
	case asked.After(pd):
		return asked, nil
	default:
		return pd.Add(time.Second), nil
	}
}

// olderThanParent is the error for a build asked for a date older than its parent's
// (pd; pr is the date the parent's build asked for, pd when it was not moved): it
// names both dates, where the date came from, and what to do.
func olderThanParent(asked time.Time, src DateSource, parent *manifest.Manifest, pd, pr time.Time) error {
	parentDate := pd.Format(time.RFC3339)
	if !pr.Equal(pd) {
		parentDate = fmt.Sprintf("%s (its build asked for %s and was dated a second after its own parent)", parentDate, pr.Format(time.RFC3339))
	}
	after := pd.Add(time.Second).Unix()
	var from, fix string
	switch src {
	case DateFromEnv:
		from = fmt.Sprintf("SOURCE_DATE_EPOCH=%d", asked.Unix())
		fix = fmt.Sprintf("build from the checkout the parent was built from, or a newer one (SOURCE_DATE_EPOCH is often a commit's time), or set SOURCE_DATE_EPOCH to a time after the parent's date, such as %d", after)
	case DateFromConfig:
		from = "armor.toml's date"
		fix = fmt.Sprintf("set date in armor.toml to a time after the parent's date, such as %d, or remove it", after)
	case DateFromRelease:
		from = "the release's recorded date"
		fix = "the release was not built on this parent"
	default:
		from = "this runner's clock"
		fix = fmt.Sprintf("this runner's clock is behind the one that built the parent: set it right (NTP), or set SOURCE_DATE_EPOCH to a time after the parent's date, such as %d", after)
	}
	return fmt.Errorf("%w: this build's date %s (from %s) is older than the date of its parent release %.12s, %s: apt and controld would take the new release for an older one; nothing was written; %s",
		ErrDate, asked.Format(time.RFC3339), from, parent.ID, parentDate, fix)
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
