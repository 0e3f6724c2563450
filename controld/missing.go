package controld

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/armor-apt/armor/controld/api"
	"github.com/armor-apt/armor/controld/state"
	"github.com/armor-apt/armor/manifest"
	"github.com/armor-apt/armor/store"
)

// reportMissing takes the objects a store check found missing or damaged, checks each
// again in the store, and keeps those still gone in the repository's known-missing set
// (those found present and intact leave it). controld believes no report it has not
// confirmed: a report can only make it check more, never trust more.
func (s *Server) reportMissing(c *call) error {
	name := c.r.PathValue("repo")
	if err := c.allow(name, api.ActionPush); err != nil {
		return err
	}
	var req api.MissingReportRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	for i, o := range req.Objects {
		if !manifest.ValidDigest(o.SHA256) {
			return badRequest("objects[%d].sha256 %q is not a sha256 (64 lowercase hex digits)", i, o.SHA256)
		}
		if o.Size < -1 {
			return badRequest("objects[%d].size %d is negative (-1 when unknown)", i, o.Size)
		}
	}
	if _, err := s.st.Repository(c.ctx(), name); err != nil {
		return err
	}
	gone, present, err := s.recheck(c.ctx(), req.Objects, c.tok.Name)
	if err != nil {
		return err
	}
	if err := s.st.MarkMissing(c.ctx(), name, gone); err != nil {
		return err
	}
	if err := s.st.ClearMissing(c.ctx(), name, present); err != nil {
		return err
	}
	set, err := s.st.Missing(c.ctx(), name)
	if err != nil {
		return err
	}
	s.log.Info("missing objects reported", "repository", name, "reported", len(req.Objects),
		"confirmed", len(gone), "present", len(present), "known_missing", len(set), "token", c.tok.Name)
	writeJSON(c.w, http.StatusOK, api.MissingReportResponse{
		Confirmed: toAPIMissing(gone), Present: orEmpty(present), Missing: toAPIMissing(set),
	})
	return nil
}

// listMissing answers the repository's known-missing set.
func (s *Server) listMissing(c *call) error {
	r, err := s.repo(c, api.ActionRead)
	if err != nil {
		return err
	}
	set, err := s.st.Missing(c.ctx(), r.Name)
	if err != nil {
		return err
	}
	writeJSON(c.w, http.StatusOK, toAPIMissing(set))
	return nil
}

// recheck reads each object from the store and hashes it: the objects still missing or
// damaged (sorted, found by who) and the digests of those present and intact (sorted).
// A size of -1 is not checked, only the hash.
func (s *Server) recheck(ctx context.Context, objs []api.ObjectRef, who string) (gone []state.MissingObject, present []string, err error) {
	var mu sync.Mutex
	seen := map[string]bool{}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(s.cfg.StoreConcurrency)
	for _, o := range objs {
		if seen[o.SHA256] {
			continue
		}
		seen[o.SHA256] = true
		g.Go(func() error {
			problem, err := s.inspect(gctx, o)
			if err != nil {
				return err
			}
			mu.Lock()
			defer mu.Unlock()
			if problem == "" {
				present = append(present, o.SHA256)
			} else {
				gone = append(gone, state.MissingObject{SHA256: o.SHA256, Size: o.Size, Problem: problem, FoundAt: s.now().UTC(), FoundBy: who})
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, nil, err
	}
	slices.Sort(present)
	slices.SortFunc(gone, func(a, b state.MissingObject) int { return strings.Compare(a.SHA256, b.SHA256) })
	return gone, present, nil
}

// inspect reads one object whole and says what is wrong with it ("" when nothing): it
// is missing, or holds another size, or other bytes.
func (s *Server) inspect(ctx context.Context, o api.ObjectRef) (string, error) {
	rc, err := s.store.Open(ctx, o.SHA256, 0, -1)
	if errors.Is(err, store.ErrNotFound) {
		return state.ObjectMissing, nil
	}
	if err != nil {
		return "", storeFailed("check object %s in the store %s: %w", o.SHA256, s.store, err)
	}
	defer rc.Close()
	h := sha256.New()
	n, err := io.Copy(h, rc)
	if err != nil {
		return "", storeFailed("read object %s from the store %s: %w", o.SHA256, s.store, err)
	}
	switch {
	case o.Size >= 0 && n != o.Size:
		return state.ObjectSize, nil
	case hex.EncodeToString(h.Sum(nil)) != o.SHA256:
		return state.ObjectHash, nil
	}
	return "", nil
}

// checkKnownMissing checks again, by reading them, the objects of m that are in set, the
// repository's known-missing set, whatever release uses them: it returns those
// still gone (a 422 naming them), and takes those found intact out of the set. The
// objects it checked are in checked, so checkObjects does not ask about them again.
func (s *Server) checkKnownMissing(ctx context.Context, repo string, set []state.MissingObject, m *manifest.Manifest) (checked map[string]bool, err error) {
	if len(set) == 0 {
		return nil, nil
	}
	suspect := make(map[string]bool, len(set))
	for _, x := range set {
		suspect[x.SHA256] = true
	}
	var refs []api.ObjectRef
	checked = map[string]bool{}
	m.EachObject(func(o manifest.Object) {
		if suspect[o.SHA256] && !checked[o.SHA256] {
			refs = append(refs, api.ObjectRef{SHA256: o.SHA256, Size: o.Size})
			checked[o.SHA256] = true
		}
	})
	if len(refs) == 0 {
		return nil, nil
	}
	slices.SortFunc(refs, func(a, b api.ObjectRef) int { return strings.Compare(a.SHA256, b.SHA256) })
	gone, present, err := s.recheck(ctx, refs, "")
	if err != nil {
		return nil, err
	}
	if len(present) > 0 {
		if err := s.st.ClearMissing(ctx, repo, present); err != nil {
			return nil, err
		}
		s.log.Info("known-missing objects found present again", "repository", repo, "objects", len(present))
	}
	if len(gone) == 0 {
		return checked, nil
	}
	where := firstPaths(m)
	items := make([]string, len(gone))
	sums := make([]string, len(gone))
	for i, x := range gone {
		items[i] = fmt.Sprintf("%s (%s: %s)", x.SHA256, where[x.SHA256], x.Problem)
		sums[i] = x.SHA256
	}
	e := invalidRelease("%d objects of the release are still missing from the store %s or damaged there (a store check reported them, and controld checked each again): %s: upload them again with armor push --repair",
		len(gone), s.store, listSome(items))
	e.Missing = sums
	return nil, e
}

// checkActivation refuses to activate the recorded release id while objects it lists
// are in the repository's known-missing set and still gone (the same 422 as recording
// it), so that a draft recorded before the loss is not activated over it. It costs
// nothing while the set is empty.
func (s *Server) checkActivation(ctx context.Context, repo, id string) error {
	set, err := s.st.Missing(ctx, repo)
	if err != nil || len(set) == 0 {
		return err
	}
	rel, err := s.st.Release(ctx, repo, id)
	if err != nil {
		return err
	}
	m, err := s.loadManifest(ctx, rel.Manifest)
	if err != nil {
		return err
	}
	_, err = s.checkKnownMissing(ctx, repo, set, m)
	return err
}

func toAPIMissing(set []state.MissingObject) []api.MissingObject {
	out := make([]api.MissingObject, len(set))
	for i, x := range set {
		out[i] = api.MissingObject{SHA256: x.SHA256, Size: x.Size, Problem: x.Problem, FoundAt: x.FoundAt, FoundBy: x.FoundBy}
	}
	return out
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
