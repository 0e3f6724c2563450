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

// ParentFollows counts the indexes proven through a kept parent's packages.
func (s *Server) ParentFollows() int64 { return s.verified.follows.Load() }

// ForgetVerified empties what controld keeps of the releases it verified (verified.go)
// and returns a function that puts it back.
func (s *Server) ForgetVerified() (restore func()) {
	v := &s.verified
	v.mu.Lock()
	list, total := v.list, v.total
	v.list, v.total = nil, 0
	v.mu.Unlock()
	return func() {
		v.mu.Lock()
		v.list, v.total = list, total
		v.mu.Unlock()
	}
}

// Cold empties what controld keeps in memory of the indexes and releases it verified,
// as a restart would, and returns a function that puts it back.
func (s *Server) Cold() (restore func()) {
	keep := s.KeepIndexCache()
	verified := s.ForgetVerified()
	c := &s.indexes
	c.mu.Lock()
	c.byForm, c.lastAt, c.total = nil, nil, 0
	c.mu.Unlock()
	return func() {
		keep()
		verified()
	}
}
