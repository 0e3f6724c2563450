package controld

import (
	"github.com/armor-apt/armor/controld/api"
	"github.com/armor-apt/armor/controld/state"
)

// markRolledBack sets RolledBack on the releases of repo that are rolled back.
func (s *Server) markRolledBack(c *call, repo string, rels []api.Release) error {
	marks, err := s.st.RolledBack(c.ctx(), repo)
	if err != nil || len(marks) == 0 {
		return err
	}
	byID := make(map[string]api.RolledBack, len(marks))
	for _, m := range marks {
		byID[m.Release] = toAPIRolledBack(m)
	}
	for i := range rels {
		if m, ok := byID[rels[i].ID]; ok {
			rels[i].RolledBack = &m
		}
	}
	return nil
}

func toAPIRolledBack(m state.RolledBack) api.RolledBack {
	return api.RolledBack{Release: m.Release, ReplacedBy: m.ReplacedBy, At: m.At, By: m.By}
}

// rolledBack returns the mark of release id of repo, or nil.
func (s *Server) rolledBack(c *call, repo, id string) (*api.RolledBack, error) {
	rels := []api.Release{{ID: id}}
	err := s.markRolledBack(c, repo, rels)
	return rels[0].RolledBack, err
}
