package controld

import (
	"net/http"
)

// ownToken answers the caller's own token: its name and scope, never its secret or hash.
// Any valid token may ask, so a client can check what it may do before it does anything
// (armor push checks that it may push before it uploads).
func (s *Server) ownToken(c *call) error {
	writeJSON(c.w, http.StatusOK, toAPIToken(c.tok))
	return nil
}
