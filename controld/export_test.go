package controld

import "context"

// Expire runs one look for ended retention windows (normally every 30s in Serve).
func (s *Server) Expire(ctx context.Context) error { return s.expire(ctx) }

// IndexReads counts how the indexes were read so far: from the cache, against the
// profile of an earlier form, whole.
func (s *Server) IndexReads() (cached, incremental, whole int64) {
	r := &s.indexes.reads
	return r.cached.Load(), r.incremental.Load(), r.whole.Load()
}
