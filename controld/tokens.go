package controld

import (
	"net/http"

	"github.com/armor-apt/armor/controld/api"
	"github.com/armor-apt/armor/controld/state"
)

// Token management needs the admin action, and reaches only tokens whose repositories
// lie within the caller's own scope: an admin of one repository cannot mint or revoke
// a token for another.

func (s *Server) createToken(c *call) error {
	if !c.isAdmin() {
		return forbidden("token %s may not admin", c.tok.Name)
	}
	var req api.CreateTokenRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	tok, secret, err := makeToken(req.Name, req.Repositories, req.Actions, c.tok.Name, s.now())
	if err != nil {
		return err
	}
	if !c.within(tok.Repositories) {
		return forbidden("token %s may not create a token for repositories %v beyond its own %v", c.tok.Name, tok.Repositories, c.tok.Repositories)
	}
	if err := s.st.CreateToken(c.ctx(), tok); err != nil {
		return err
	}
	s.log.Info("token created", "name", tok.Name, "repositories", tok.Repositories, "actions", tok.Actions, "by", c.tok.Name)
	writeJSON(c.w, http.StatusCreated, api.CreateTokenResponse{Token: toAPIToken(tok), Secret: secret})
	return nil
}

func (s *Server) listTokens(c *call) error {
	if !c.isAdmin() {
		return forbidden("token %s may not admin", c.tok.Name)
	}
	all, err := s.st.Tokens(c.ctx())
	if err != nil {
		return err
	}
	out := []api.Token{}
	for _, t := range all {
		if c.within(t.Repositories) {
			out = append(out, toAPIToken(t))
		}
	}
	writeJSON(c.w, http.StatusOK, out)
	return nil
}

func (s *Server) revokeToken(c *call) error {
	if !c.isAdmin() {
		return forbidden("token %s may not admin", c.tok.Name)
	}
	name := c.r.PathValue("name")
	all, err := s.st.Tokens(c.ctx())
	if err != nil {
		return err
	}
	for _, t := range all {
		if t.Name == name && !c.within(t.Repositories) {
			return forbidden("token %s may not revoke token %s, whose repositories %v are beyond its own", c.tok.Name, name, t.Repositories)
		}
	}
	tok, err := s.st.RevokeToken(c.ctx(), name, c.tok.Name, s.now().UTC())
	if err != nil {
		return err
	}
	s.log.Info("token revoked", "name", name, "by", c.tok.Name)
	writeJSON(c.w, http.StatusOK, toAPIToken(tok))
	return nil
}

func toAPIToken(t state.Token) api.Token {
	out := api.Token{
		Name: t.Name, Repositories: nonNil(t.Repositories), Actions: nonNil(t.Actions),
		CreatedAt: t.CreatedAt, CreatedBy: t.CreatedBy, RevokedBy: t.RevokedBy,
	}
	if t.Revoked() {
		at := t.RevokedAt
		out.RevokedAt = &at
	}
	return out
}
