package gen

import (
	"errors"
	"fmt"
	"time"

	"github.com/armor-apt/armor/debian/release"
	"github.com/armor-apt/armor/manifest"
)

// Dates a release must not be signed with. apt ignores an InRelease older than the one
// it holds and refuses one whose Valid-Until has passed; controld refuses to activate a
// release older than the active one, or expired. A build that would sign such a Release
// fails before it writes anything, and says how to set the date.

// ErrDate is wrapped by the errors of checkDates.
var ErrDate = errors.New("build date")

// checkDates refuses a build dated date before its parent, or whose Valid-Until (date
// plus a suite's ValidFor) has passed by now.
func checkDates(date time.Time, suites []Suite, now time.Time, parent *manifest.Manifest) error {
	date = date.UTC().Truncate(time.Second)
	if parent != nil {
		if pd, err := time.Parse(time.RFC3339, parent.Date); err == nil && date.Before(pd) {
			return fmt.Errorf("%w %s is older than the date of the release it is built on (%s, release %s): apt clients that have that release would ignore this one, and controld refuses to activate it; the build date is SOURCE_DATE_EPOCH when it is set: unset it, or set it to %d or later",
				ErrDate, release.FormatDate(date), release.FormatDate(pd), parent.ID, pd.Unix())
		}
	}
	for _, s := range suites {
		if s.ValidFor <= 0 {
			continue
		}
		if until := date.Add(s.ValidFor); !until.After(now) {
			return fmt.Errorf("%w: suite %s would be valid until %s (the build date %s plus valid_for %s), which has passed: apt would refuse it as expired; the build date is SOURCE_DATE_EPOCH when it is set: set it to a recent time (after %d), or raise valid_for",
				ErrDate, s.Codename, release.FormatDate(until), release.FormatDate(date), s.ValidFor, now.Add(-s.ValidFor).Unix())
		}
	}
	return nil
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
