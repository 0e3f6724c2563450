package controld

import (
	"bytes"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp/armor"

	"github.com/armor-apt/armor/controld/api"
	"github.com/armor-apt/armor/controld/state"
	"github.com/armor-apt/armor/debian/sign"
	"github.com/armor-apt/armor/internal/duration"
)

func (s *Server) createRepo(c *call) error {
	var req api.CreateRepoRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	if err := checkRepoName(req.Name); err != nil {
		return err
	}
	if err := c.allow(req.Name, api.ActionAdmin); err != nil {
		return err
	}
	hosts, err := api.NormalizeHostnames(req.Hostnames)
	if err != nil {
		return badRequest("%v", err)
	}
	now := s.now().UTC()
	r := state.Repository{
		Name: req.Name, Hostnames: hosts, Retention: s.cfg.Retention.D(),
		CreatedAt: now, CreatedBy: c.tok.Name,
	}
	if req.Retention != nil {
		if req.Retention.D() < 0 {
			return badRequest("retention %v is negative", req.Retention)
		}
		r.Retention = req.Retention.D()
	}
	for i, armored := range req.Keys {
		k, err := parseKey(armored, c.tok.Name, now)
		if err != nil {
			return badRequest("key %d: %v", i+1, err)
		}
		r.Keys = append(r.Keys, k)
	}
	if err := s.st.CreateRepository(c.ctx(), r); err != nil {
		return err
	}
	r, err = s.st.Repository(c.ctx(), r.Name)
	if err != nil {
		return err
	}
	writeJSON(c.w, http.StatusCreated, toAPIRepo(r))
	return nil
}

func (s *Server) listRepos(c *call) error {
	all, err := s.st.Repositories(c.ctx())
	if err != nil {
		return err
	}
	out := []api.Repository{}
	for _, r := range all {
		if c.can(r.Name, api.ActionRead) {
			out = append(out, toAPIRepo(r))
		}
	}
	writeJSON(c.w, http.StatusOK, out)
	return nil
}

// repo authorises action on the request's {repo} and loads that repository.
func (s *Server) repo(c *call, action string) (state.Repository, error) {
	name := c.r.PathValue("repo")
	if err := c.allow(name, action); err != nil {
		return state.Repository{}, err
	}
	return s.st.Repository(c.ctx(), name)
}

func (s *Server) showRepo(c *call) error {
	r, err := s.repo(c, api.ActionRead)
	if err != nil {
		return err
	}
	writeJSON(c.w, http.StatusOK, toAPIRepo(r))
	return nil
}

func (s *Server) addHostnames(c *call) error {
	r, err := s.repo(c, api.ActionAdmin)
	if err != nil {
		return err
	}
	var req api.HostnamesRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	hosts, err := api.NormalizeHostnames(req.Hostnames)
	if err != nil {
		return badRequest("%v", err)
	}
	if len(hosts) == 0 {
		return badRequest("no hostnames given")
	}
	r, err = s.st.AddHostnames(c.ctx(), r.Name, hosts)
	if err != nil {
		return err
	}
	writeJSON(c.w, http.StatusOK, toAPIRepo(r))
	return nil
}

func (s *Server) addKey(c *call) error {
	r, err := s.repo(c, api.ActionAdmin)
	if err != nil {
		return err
	}
	var req api.KeyRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	k, err := parseKey(req.Key, c.tok.Name, s.now().UTC())
	if err != nil {
		return badRequest("key: %v", err)
	}
	r, err = s.st.AddKey(c.ctx(), r.Name, k)
	if err != nil {
		return err
	}
	writeJSON(c.w, http.StatusOK, toAPIRepo(r))
	return nil
}

func (s *Server) removeKey(c *call) error {
	r, err := s.repo(c, api.ActionAdmin)
	if err != nil {
		return err
	}
	r, err = s.st.RemoveKey(c.ctx(), r.Name, c.r.PathValue("fingerprint"), c.tok.Name, s.now().UTC())
	if err != nil {
		return err
	}
	writeJSON(c.w, http.StatusOK, toAPIRepo(r))
	return nil
}

func (s *Server) setRetention(c *call) error {
	r, err := s.repo(c, api.ActionAdmin)
	if err != nil {
		return err
	}
	var req api.RetentionRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	if req.Retention.D() < 0 {
		return badRequest("retention %v is negative", req.Retention)
	}
	r, err = s.st.SetRetention(c.ctx(), r.Name, req.Retention.D())
	if err != nil {
		return err
	}
	writeJSON(c.w, http.StatusOK, toAPIRepo(r))
	return nil
}

// parseKey reads one public OpenPGP key and keeps it re-armored, public part only. A
// secret key is refused: it must never leave the distributor's machine.
func parseKey(data, by string, at time.Time) (state.Key, error) {
	list, err := sign.ReadKeyring([]byte(data))
	if err != nil {
		return state.Key{}, err
	}
	if len(list) != 1 {
		return state.Key{}, fmt.Errorf("found %d keys; send one key per request", len(list))
	}
	e := list[0]
	if e.PrivateKey != nil {
		return state.Key{}, fmt.Errorf("this is a secret key: send only the public key (it must never leave the signing machine)")
	}
	var buf bytes.Buffer
	w, err := armor.Encode(&buf, "PGP PUBLIC KEY BLOCK", nil)
	if err != nil {
		return state.Key{}, err
	}
	if err := e.Serialize(w); err != nil {
		return state.Key{}, fmt.Errorf("serialize key: %w", err)
	}
	if err := w.Close(); err != nil {
		return state.Key{}, err
	}
	buf.WriteByte('\n')
	var uids []string
	for name := range e.Identities {
		uids = append(uids, name)
	}
	slices.Sort(uids)
	return state.Key{
		Fingerprint: strings.ToUpper(fmt.Sprintf("%X", e.PrimaryKey.Fingerprint)),
		UserIDs:     uids, Armored: buf.String(), AddedAt: at, AddedBy: by,
	}, nil
}

func toAPIRepo(r state.Repository) api.Repository {
	out := api.Repository{
		Name: r.Name, Hostnames: nonNil(r.Hostnames), Keys: []api.Key{},
		Retention: duration.Duration(r.Retention), CreatedAt: r.CreatedAt, CreatedBy: r.CreatedBy,
		Active: toAPIPointer(r.Active),
	}
	for _, k := range r.Keys {
		out.Keys = append(out.Keys, api.Key{Fingerprint: k.Fingerprint, UserIDs: nonNil(k.UserIDs),
			Armored: k.Armored, AddedAt: k.AddedAt, AddedBy: k.AddedBy})
	}
	return out
}

func toAPIPointer(p *state.Pointer) *api.Pointer {
	if p == nil {
		return nil
	}
	return &api.Pointer{Release: p.Release, Manifest: p.Manifest, ActivatedAt: p.At, ActivatedBy: p.By}
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
