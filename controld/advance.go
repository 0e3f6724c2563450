package controld

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/armor-apt/armor/controld/api"
	"github.com/armor-apt/armor/controld/state"
	"github.com/armor-apt/armor/debian/release"
)

// No going back without saying so (invariant 9). Whoever holds an activate token could
// otherwise put an older signed release back in place of the active one, or a deleted
// one, or one of another line, and apt clients that never saw the newer one would take
// it: a rollback attack dressed as a push. checkAdvance is the one rule both ways of
// activating apply, recording with "activate" and /activate: a flip that is neither a
// rollback nor forced moves the pointer forward only, to a release
//
//   - that was never deleted,
//   - built on the active release (the active release is among its ancestors),
//   - whose suites are none of them older, by their signed Release's Date, than the same
//     suites of the active release.
//
// /activate of a release the active one is built on is a rollback: the state marks the
// releases it skips rolled back, as `armor activate` documents; recording with "activate"
// goes back only with "rollback" or "force". Every refusal is a 409 whose code says which
// rule it broke, and nothing changes.

// checkAdvance applies the rule to a flip to release to, expected to replace expect
// (the compare-and-swap makes sure it does). byID is true for /activate.
func (s *Server) checkAdvance(ctx context.Context, repo string, to state.Release, expect string, byID bool) error {
	if expect == "" || to.ID == expect {
		return nil // the first activation, or none at all
	}
	deleted, err := s.st.DeletedReleases(ctx, repo)
	if err != nil {
		return err
	}
	for _, d := range deleted {
		if d.Release.ID == to.ID {
			return downgrade(api.CodeDeletedRelease, "repository %s: release %s was deleted at %s by %s; activating it again takes force: %s",
				repo, to.ID, d.DeletedAt.UTC().Format(time.RFC3339), d.DeletedBy, howToForce(byID))
		}
	}
	active, err := s.st.Release(ctx, repo, expect)
	if errors.Is(err, state.ErrNotFound) {
		return nil // the compare-and-swap fails with the release active now
	}
	if err != nil {
		return err
	}
	onLine, err := s.descends(ctx, repo, to.Parent, active)
	if err != nil {
		return err
	}
	if !onLine {
		if byID {
			if back, err := s.descends(ctx, repo, active.Parent, to); err != nil || back {
				return err // a rollback by activation
			}
		}
		return downgrade(api.CodeNotOnActiveLine, "repository %s: release %s is not built on the active release %s (its parent is %s): it would replace what the active release holds with another line; build on the active release, or, to go back knowingly: %s",
			repo, to.ID, active.ID, parentOf(to), howToForce(byID))
	}
	return s.checkDates(ctx, repo, to, active, byID)
}

// descends reports whether the release whose parent is parent descends from anc: anc is
// parent or one of parent's ancestors. Parents are recorded before their children, so
// the walk stops below anc's sequence number.
func (s *Server) descends(ctx context.Context, repo, parent string, anc state.Release) (bool, error) {
	for cur := parent; cur != ""; {
		if cur == anc.ID {
			return true, nil
		}
		rel, err := s.st.Release(ctx, repo, cur)
		if errors.Is(err, state.ErrNotFound) {
			return false, nil // deleted: the line is broken
		}
		if err != nil {
			return false, err
		}
		if rel.Seq < anc.Seq {
			return false, nil
		}
		cur = rel.Parent
	}
	return false, nil
}

// checkDates refuses to when one of its suites is older than the same suite of active,
// or dated the same second with other content (apt could not tell which is newer, and
// would take either).
func (s *Server) checkDates(ctx context.Context, repo string, to, active state.Release, byID bool) error {
	newer, err := s.suitesOf(ctx, repo, to)
	if err != nil {
		return err
	}
	older, err := s.suitesOf(ctx, repo, active)
	if err != nil {
		return err
	}
	dirs := make([]string, 0, len(older))
	for dir := range older {
		dirs = append(dirs, dir)
	}
	slices.Sort(dirs)
	for _, dir := range dirs {
		t, ok := newer[dir]
		a := older[dir]
		if !ok || t.date.After(a.date) || t.date.Equal(a.date) && t.inRelease == a.inRelease {
			continue
		}
		what := "older than in"
		if t.date.Equal(a.date) {
			what = "the same second as, but other than, the suite in"
		}
		return downgrade(api.CodeOlderRelease, "repository %s: suite %s of release %s is dated %s, %s the active release %s (%s): apt clients that have the active one would ignore it, or could not tell which is newer; sign it again with a later date (armor build --resign), or, to go back knowingly: %s",
			repo, strings.TrimPrefix(dir, "dists/"), to.ID, release.FormatDate(t.date), what, active.ID, release.FormatDate(a.date), howToForce(byID))
	}
	return nil
}

// suiteState is what the downgrade rule compares of a suite.
type suiteState struct {
	date      time.Time
	inRelease string
}

// suitesOf returns the suites of rel: as recorded, or, for a release recorded before
// controld kept them, read from its manifest and its Release files (which recording
// checked are the text its InRelease files sign).
func (s *Server) suitesOf(ctx context.Context, repo string, rel state.Release) (map[string]suiteState, error) {
	out := map[string]suiteState{}
	if rel.Suites != nil {
		for dir, su := range rel.Suites {
			t, err := time.Parse(time.RFC3339, su.Date)
			if err != nil {
				return nil, fmt.Errorf("release %s of %s: suite date %q: %w", rel.ID, repo, su.Date, err)
			}
			out[dir] = suiteState{t, su.InRelease}
		}
		return out, nil
	}
	m, err := s.loadManifest(ctx, rel.Manifest)
	if err != nil {
		return nil, err
	}
	paths := filePaths(m)
	for p, o := range paths {
		if !strings.HasPrefix(p, "dists/") || path.Base(p) != "Release" {
			continue
		}
		data, err := s.readObject(ctx, p, o.SHA256, maxSignedFile)
		if err != nil {
			return nil, err
		}
		if t, err := release.Date(data); err == nil {
			dir := path.Dir(p)
			out[dir] = suiteState{t, paths[dir+"/InRelease"].SHA256}
		}
	}
	return out, nil
}

// howToForce says how to go back knowingly, by the way the flip was asked.
func howToForce(byID bool) string {
	if byID {
		return "armor activate --force"
	}
	return "armor rollback, or armor push --force"
}

func downgrade(code, format string, args ...any) *Error {
	return apiErrorf(http.StatusConflict, code, format, args...)
}

// parentOf names a release's parent in messages.
func parentOf(rel state.Release) string {
	if rel.Parent == "" {
		return "none"
	}
	return rel.Parent
}
