package controld

import (
	"errors"
	"net/http"

	"github.com/armor-apt/armor/controld/api"
	"github.com/armor-apt/armor/controld/state"
	"github.com/armor-apt/armor/manifest"
)

// recordRelease verifies a manifest already in the object store and records it,
// optionally activating it in the same transaction.
func (s *Server) recordRelease(c *call) error {
	name := c.r.PathValue("repo")
	if err := c.allow(name, api.ActionPush); err != nil {
		return err
	}
	var req api.RecordRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	if req.Activate {
		if err := c.allow(name, api.ActionActivate); err != nil {
			return err
		}
	} else if req.ExpectActive != "" || req.Rollback || req.Force {
		return badRequest("expect_active, rollback and force are only meaningful with \"activate\": true")
	}
	if !manifest.ValidDigest(req.Manifest) {
		return badRequest("manifest %q is not the sha256 of the manifest object (64 lowercase hex digits)", req.Manifest)
	}
	if req.ExpectActive != "" && !manifest.ValidDigest(req.ExpectActive) {
		return badRequest("expect_active %q is not a release id", req.ExpectActive)
	}
	release, err := s.holdRecording(c.ctx()) // no object is collected between verifying and recording
	if err != nil {
		return err
	}
	defer release()
	repo, err := s.st.Repository(c.ctx(), name)
	if err != nil {
		return err
	}
	m, err := s.loadManifest(c.ctx(), req.Manifest)
	if err != nil {
		return err
	}
	if m.Repository != repo.Name {
		return invalidRelease("manifest %s is for repository %q, not %q", req.Manifest, m.Repository, repo.Name)
	}
	rel, err := s.st.Release(c.ctx(), repo.Name, m.ID)
	switch {
	case errors.Is(err, state.ErrNotFound):
		// Not recorded yet: verify everything before recording.
		if rel, err = s.verifyRelease(c.ctx(), repo, m, req.Manifest); err != nil {
			return err
		}
		rel.PushedBy, rel.PushedAt = c.tok.Name, s.now().UTC()
	case err != nil:
		return err
	case req.Activate:
		// Recorded before: not verified again, but not activated over lost objects.
		if err := s.checkActivation(c.ctx(), repo.Name, rel.ID); err != nil {
			return err
		}
	}
	if req.Activate && !req.Rollback && !req.Force {
		if err := s.checkAdvance(c.ctx(), repo.Name, rel, req.ExpectActive, false); err != nil {
			return err
		}
	}
	var flip *state.Flip
	if req.Activate {
		flip = &state.Flip{Expect: req.ExpectActive, By: c.tok.Name, At: s.now().UTC(), Rollback: req.Rollback, Force: req.Force}
	}
	out, err := s.st.RecordRelease(c.ctx(), rel, flip)
	if err != nil {
		return err
	}
	resp := api.RecordResponse{Release: toAPIRelease(out.Release), Created: out.Created}
	if out.Activation != nil {
		a := toAPIActivation(*out.Activation)
		resp.Activation = &a
	}
	status := http.StatusOK
	if out.Created {
		status = http.StatusCreated
	}
	s.log.Info("release recorded", "repository", repo.Name, "release", rel.ID, "created", out.Created,
		"activated", out.Activation != nil, "token", c.tok.Name)
	writeJSON(c.w, status, resp)
	return nil
}

func (s *Server) listReleases(c *call) error {
	r, err := s.repo(c, api.ActionRead)
	if err != nil {
		return err
	}
	rels, err := s.st.Releases(c.ctx(), r.Name)
	if err != nil {
		return err
	}
	out := make([]api.Release, 0, len(rels))
	for _, rel := range rels {
		out = append(out, toAPIRelease(rel))
	}
	if err := s.markRolledBack(c, r.Name, out); err != nil {
		return err
	}
	writeJSON(c.w, http.StatusOK, out)
	return nil
}

func (s *Server) showRelease(c *call) error {
	r, err := s.repo(c, api.ActionRead)
	if err != nil {
		return err
	}
	rel, err := s.st.Release(c.ctx(), r.Name, c.r.PathValue("id"))
	if err != nil {
		return err
	}
	out := []api.Release{toAPIRelease(rel)}
	if err := s.markRolledBack(c, r.Name, out); err != nil {
		return err
	}
	writeJSON(c.w, http.StatusOK, out[0])
	return nil
}

func (s *Server) activate(c *call) error {
	name := c.r.PathValue("repo")
	if err := c.allow(name, api.ActionActivate); err != nil {
		return err
	}
	var req api.ActivateRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	if !manifest.ValidDigest(req.Release) {
		return badRequest("release %q is not a release id (64 lowercase hex digits)", req.Release)
	}
	if err := s.checkActivation(c.ctx(), name, req.Release); err != nil {
		return err
	}
	if !req.Force {
		rel, err := s.st.Release(c.ctx(), name, req.Release)
		switch {
		case err == nil:
			if err := s.checkAdvance(c.ctx(), name, rel, req.ExpectActive, true); err != nil {
				return err
			}
		case !errors.Is(err, state.ErrNotFound): // an unknown release is the flip's 404
			return err
		}
	}
	return s.flip(c, state.Flip{Repository: name, To: req.Release, Expect: req.ExpectActive, Force: req.Force})
}

func (s *Server) rollback(c *call) error {
	name := c.r.PathValue("repo")
	if err := c.allow(name, api.ActionActivate); err != nil {
		return err
	}
	var req api.RollbackRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	return s.flip(c, state.Flip{Repository: name, Expect: req.ExpectActive, Rollback: true, Force: req.Force})
}

// flip performs the compare-and-swap; a lost one is a 409 naming the active release.
func (s *Server) flip(c *call, f state.Flip) error {
	if f.Expect != "" && !manifest.ValidDigest(f.Expect) {
		return badRequest("expect_active %q is not a release id", f.Expect)
	}
	f.By, f.At = c.tok.Name, s.now().UTC()
	a, err := s.st.Activate(c.ctx(), f)
	if err != nil {
		return err
	}
	s.log.Info("release activated", "repository", f.Repository, "from", a.From, "to", a.To,
		"rollback", a.Rollback, "token", c.tok.Name)
	writeJSON(c.w, http.StatusOK, toAPIActivation(a))
	return nil
}

func (s *Server) history(c *call) error {
	r, err := s.repo(c, api.ActionRead)
	if err != nil {
		return err
	}
	hist, err := s.st.History(c.ctx(), r.Name)
	if err != nil {
		return err
	}
	out := make([]api.Activation, 0, len(hist))
	for _, a := range hist {
		out = append(out, toAPIActivation(a))
	}
	writeJSON(c.w, http.StatusOK, out)
	return nil
}

func (s *Server) status(c *call) error {
	r, err := s.repo(c, api.ActionRead)
	if err != nil {
		return err
	}
	rels, err := s.st.Releases(c.ctx(), r.Name)
	if err != nil {
		return err
	}
	hist, err := s.st.History(c.ctx(), r.Name)
	if err != nil {
		return err
	}
	v, err := s.st.Version(c.ctx())
	if err != nil {
		return err
	}
	out := api.Status{
		Repository: r.Name, Hostnames: nonNil(r.Hostnames), Active: toAPIPointer(r.Active),
		Retained: retained(r, s.now()), Releases: len(rels), RoutesVersion: v,
	}
	if len(hist) > 0 {
		out.Previous = hist[len(hist)-1].From
		if out.PreviousRolledBack, err = s.rolledBack(c, r.Name, out.Previous); err != nil {
			return err
		}
	}
	if len(rels) > 0 {
		latest := toAPIRelease(rels[len(rels)-1])
		out.Latest = &latest
	}
	writeJSON(c.w, http.StatusOK, out)
	return nil
}

func toAPIRelease(r state.Release) api.Release {
	return api.Release{
		Repository: r.Repository, ID: r.ID, Manifest: r.Manifest, Parent: r.Parent, Date: r.Date,
		Packages: r.Packages, Files: r.Files, Size: r.Size, Signer: r.Signer,
		PushedBy: r.PushedBy, PushedAt: r.PushedAt,
	}
}

func toAPIActivation(a state.Activation) api.Activation {
	return api.Activation{Repository: a.Repository, Seq: a.Seq, From: a.From, To: a.To, By: a.By, At: a.At, Rollback: a.Rollback}
}
