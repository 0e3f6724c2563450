package controld

import (
	"context"
	"maps"
)

// Expire runs one look for ended retention windows (normally every 30s in Serve).
func (s *Server) Expire(ctx context.Context) error { return s.expire(ctx) }

// IndexReads counts how the indexes were read so far: from the cache, against the
// profile of an earlier form, whole.
func (s *Server) IndexReads() (cached, incremental, whole int64) {
	r := &s.indexes.reads
	return r.cached.Load(), r.incremental.Load(), r.whole.Load()
}

// KeepIndexCache returns a function that puts the index cache back as it is now.
func (s *Server) KeepIndexCache() (restore func()) {
	c := &s.indexes
	c.mu.Lock()
	byForm, lastAt, total := maps.Clone(c.byForm), maps.Clone(c.lastAt), c.total
	c.mu.Unlock()
	return func() {
		c.mu.Lock()
		c.byForm, c.lastAt, c.total = maps.Clone(byForm), maps.Clone(lastAt), total
		c.mu.Unlock()
	}
}

// BoundCheck reads a manifest from the store and verifies its suites, as recording
// does, and returns the checks of invariant 9 on it (bound.go) to run.
func (s *Server) BoundCheck(ctx context.Context, repo, manifestSum string) (func() error, error) {
	m, err := s.loadManifest(ctx, manifestSum)
	if err != nil {
		return nil, err
	}
	r, err := s.st.Repository(ctx, repo)
	if err != nil {
		return nil, err
	}
	paths := filePaths(m)
	suites, _, err := s.verifySuites(ctx, r, paths)
	if err != nil {
		return nil, err
	}
	return func() error {
		if err := checkDistsFiles(m, suites); err != nil {
			return err
		}
		return s.boundPackages(ctx, repo, m, suites, paths)
	}, nil
}
