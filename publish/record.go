package publish

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/armor-apt/armor/controld/api"
	"github.com/armor-apt/armor/controld/client"
)

// RecordOptions say which release Record hands to controld.
type RecordOptions struct {
	URL      string // controld's URL, named in errors
	Repo     string
	Release  string // the release's id
	Parent   string // the release it was built on: its manifest's parent ("" for a first release)
	Manifest string // the digest of its manifest, an object already in the store
	// Activate also makes the release active, provided its parent is the active release
	// (compare-and-swap on the parent).
	Activate bool
	// Force activates the release even if it, or a release it is built on, was rolled
	// back (which is otherwise a *RolledBackError). A release that a re-signed rollback
	// replaced is activated over the release that rollback activated, while it is active.
	Force bool
}

// Record records a release in controld and, if asked, activates it on its parent: the
// flip happens only if the active release is the one the release was built on, so a
// release never replaces one it does not contain. A release that is active already (a
// push run again after one that died once it had activated) is left as it is. Record
// reports whether the release is active afterwards, or was activated by an earlier run
// of the same push: one whose answer was lost (controld committed the flip and died, or
// the connection broke) and that a release built on it has superseded since.
//
// A release whose parent is not the active release is neither activated nor recorded,
// and the error is a *StaleParentError. A release that was rolled back, or is built on
// one, is neither activated nor recorded unless Force, and the error is a
// *RolledBackError. Other errors name controld; a missing repository says what to do
// about it.
func Record(ctx context.Context, c *client.Client, o RecordOptions) (activated bool, err error) {
	if !o.Activate {
		if _, err := c.RecordRelease(ctx, o.Repo, o.Manifest, false, ""); err != nil {
			return false, controldError(o.URL, o.Repo, err)
		}
		return false, nil
	}
	rr, err := c.Record(ctx, o.Repo, api.RecordRequest{Manifest: o.Manifest, Activate: true, ExpectActive: o.Parent, Force: o.Force})
	if err == nil {
		return rr.Activation != nil, nil
	}
	var ae *client.APIError
	switch {
	case errors.Is(err, client.ErrRolledBack):
		return false, rolledBackError(err, o.URL, o.Repo, o.Release, OpPush)
	case errors.Is(err, client.ErrConflict) && errors.As(err, &ae) && ae.HasActive:
		if ae.Active == o.Release {
			return true, nil
		}
		if o.Force {
			if activated, undone, err := undoRollback(ctx, c, o, ae.Active); undone {
				return activated, err
			}
		}
		if flipped(ctx, c, o) {
			return true, nil
		}
		return false, &StaleParentError{URL: o.URL, Repo: o.Repo, Release: o.Release, Parent: o.Parent, Active: ae.Active, Err: err}
	case errors.Is(err, client.ErrInvalid) && o.Parent == "" && !(errors.As(err, &ae) && len(ae.Missing) > 0):
		// controld checks a new release's parent before the compare-and-swap, so a first
		// release pushed to a repository that has releases is refused as invalid rather
		// than as a lost compare-and-swap. Name the active release, if there is one and it
		// is another: a first release that is active already was refused for something
		// else, such as objects known missing, which its own error names.
		if st, serr := c.Status(ctx, o.Repo); serr == nil && st.Active != nil && st.Active.Release != o.Release {
			return false, &StaleParentError{URL: o.URL, Repo: o.Repo, Release: o.Release, Active: st.Active.Release, Err: err}
		}
	}
	return false, controldError(o.URL, o.Repo, err)
}

// flipped reports whether controld's history holds the flip this push asks for: the
// release activated in place of its parent, and not rolled back since. A push that
// controld answered with a lost compare-and-swap after that flip did not lose a race:
// an earlier attempt of its own won it, and another release built on this one followed.
func flipped(ctx context.Context, c *client.Client, o RecordOptions) bool {
	h, err := c.History(ctx, o.Repo)
	if err != nil || !slices.ContainsFunc(h, func(a api.Activation) bool {
		return a.To == o.Release && a.From == o.Parent && !a.Rollback
	}) {
		return false
	}
	rel, err := c.Release(ctx, o.Repo, o.Release)
	return err == nil && rel.RolledBack == nil
}

// undoRollback re-activates, with Force, a release that a re-signed rollback replaced,
// in place of the release that rollback activated (whose parent is the rolled-back
// release, so the compare-and-swap on the rolled-back release's own parent cannot
// pass). It does so only while that rollback's release is still active, so nothing that
// came after it is replaced. undone reports whether it applied.
func undoRollback(ctx context.Context, c *client.Client, o RecordOptions, active string) (activated, undone bool, err error) {
	rel, err := c.Release(ctx, o.Repo, o.Release)
	if err != nil || rel.RolledBack == nil || rel.RolledBack.ReplacedBy != active {
		return false, false, nil
	}
	rr, err := c.Record(ctx, o.Repo, api.RecordRequest{Manifest: o.Manifest, Activate: true, ExpectActive: active, Force: true})
	if err != nil {
		return false, true, controldError(o.URL, o.Repo, err)
	}
	return rr.Activation != nil, true, nil
}

// StaleParentError is a push refused because the release it was built on (its parent)
// is not the active release: another release was activated since it was built (a
// concurrent push won the race, or armor rollback re-published), or its manifest is
// stale. Nothing was activated and the push recorded nothing; the way on is to build
// again on the active release.
type StaleParentError struct {
	URL, Repo string
	Release   string // the release pushed
	Parent    string // the release it was built on; "" for a first release
	Active    string // the active release; "" for none
	Err       error  // controld's answer
}

func (e *StaleParentError) Error() string {
	built := "was built on " + short(e.Parent)
	if e.Parent == "" {
		built = "was built as the repository's first release (no parent)"
	}
	if e.Active == "" {
		return fmt.Sprintf("controld %s: repository %s: release %s %s, but no release is active: activate it first (armor activate %s) and push again; nothing was activated, and this push recorded nothing",
			e.URL, e.Repo, short(e.Release), built, short(e.Parent))
	}
	return fmt.Sprintf("controld %s: repository %s: release %s %s, but the active release is %s: another release was activated since this one was built: run armor push --rebase (it applies this release's change again on the active release, and pushes that), or build on the active release with armor build --from-active and push again; nothing was activated, and this push recorded nothing (controld said: %v)",
		e.URL, e.Repo, short(e.Release), built, short(e.Active), e.Err)
}

func (e *StaleParentError) Unwrap() error { return e.Err }

// controldError says which controld failed and, where it can, what to do about it.
func controldError(url, repo string, err error) error {
	var ae *client.APIError
	if errors.As(err, &ae) && ae.Status == 404 {
		return fmt.Errorf("controld %s: %w (create the repository with `armor repos create`)", url, err)
	}
	if errors.Is(err, client.ErrDowngrade) {
		return fmt.Errorf("controld %s: %w", url, err) // the message says what to do
	}
	if errors.Is(err, client.ErrConflict) {
		return fmt.Errorf("controld %s: repository %s: %w; someone activated another release meanwhile: check `armor status` and push again", url, repo, err)
	}
	return fmt.Errorf("controld %s: %w", url, err)
}

// Activate makes a recorded release of repo active. release may be a unique prefix of
// the release's id. expect is the release that must still be active for the flip to
// happen (compare-and-swap); when empty, it is whatever is active when Activate starts.
// A release that was rolled back, or is built on one, is a *RolledBackError unless
// force. Activating a release the active one is built on rolls back the active one.
func Activate(ctx context.Context, c *client.Client, repo, release, expect string, force bool) (*api.Activation, error) {
	id, err := resolveRelease(ctx, c, repo, release)
	if err != nil {
		return nil, err
	}
	if expect == "" {
		st, err := c.Status(ctx, repo)
		if err != nil {
			return nil, err
		}
		if st.Active != nil {
			expect = st.Active.Release
		}
	}
	a, err := c.ActivateWith(ctx, repo, api.ActivateRequest{Release: id, ExpectActive: expect, Force: force})
	return a, rolledBackError(err, "", repo, id, OpActivate)
}

// resolveRelease returns the id of the one recorded release of repo that id is a prefix
// of; a full id is taken as it is.
func resolveRelease(ctx context.Context, c *client.Client, repo, id string) (string, error) {
	if len(id) >= 64 {
		return id, nil
	}
	rels, err := c.Releases(ctx, repo)
	if err != nil {
		return "", err
	}
	var match []string
	for _, r := range rels {
		if strings.HasPrefix(r.ID, id) {
			match = append(match, r.ID)
		}
	}
	if len(match) != 1 {
		return "", fmt.Errorf("release %q matches %d recorded releases of %s; give more of its id", id, len(match), repo)
	}
	return match[0], nil
}

// What was refused because of a rolled-back release, for RolledBackError's advice.
const (
	OpPush     = "push"
	OpActivate = "activate"
	OpRollback = "rollback"
)

// RolledBackError is an activation refused because the release, or a release it is
// built on, was rolled back: a push of the rolled-back release again (its parent is
// active again, so the compare-and-swap alone would let it back), of a release built on
// it, an armor activate of it, or a rollback back onto it. Nothing was activated. The
// way on is a release built on the active one, or --force to re-activate it knowingly.
type RolledBackError struct {
	URL, Repo  string
	Release    string         // the release whose activation was refused
	Op         string         // OpPush, OpActivate or OpRollback
	RolledBack api.RolledBack // the rolled-back release: Release, or one it is built on
	Err        error          // controld's answer, if it came from controld
}

func (e *RolledBackError) Error() string {
	rb := e.RolledBack
	when := fmt.Sprintf("at %s by %s (replaced by %s)", rb.At.UTC().Format(time.RFC3339), rb.By, short(rb.ReplacedBy))
	what := fmt.Sprintf("release %s was rolled back %s", short(e.Release), when)
	if rb.Release != e.Release {
		what = fmt.Sprintf("release %s is built on release %s, which was rolled back %s", short(e.Release), short(rb.Release), when)
	}
	where := "repository " + e.Repo
	if e.URL != "" {
		where = "controld " + e.URL + ": " + where
	}
	var advice string
	switch e.Op {
	case OpPush:
		advice = "a push does not re-activate a rolled-back release: to move on, build on the active release with armor build --from-active and push that; to re-activate it knowingly, armor push --force"
		if rb.Release != e.Release {
			advice = fmt.Sprintf("a push does not activate a release built on a rolled-back one: to move on, run armor push --rebase (it applies this release's change again on the active release, and pushes that), or armor build --from-active and push again; to take %s back knowingly, armor activate --force %s, then push again",
				short(rb.Release), short(rb.Release))
		}
	case OpRollback:
		advice = fmt.Sprintf("rolling back again would re-activate it: armor activate --force %s to do so knowingly, or armor activate the release you want", short(rb.Release))
	default:
		advice = fmt.Sprintf("armor activate --force %s re-activates it knowingly", short(e.Release))
	}
	return fmt.Sprintf("%s: %s: %s; nothing was activated", where, what, advice)
}

func (e *RolledBackError) Unwrap() error { return e.Err }

// rolledBackError turns controld's refusal to activate a rolled-back release into a
// *RolledBackError; it returns any other error as it is.
func rolledBackError(err error, url, repo, release, op string) error {
	var ae *client.APIError
	if errors.As(err, &ae) && errors.Is(err, client.ErrRolledBack) && ae.RolledBack != nil {
		return &RolledBackError{URL: url, Repo: repo, Release: release, Op: op, RolledBack: *ae.RolledBack, Err: err}
	}
	return err
}
