package controld

import "context"

// Expire runs one look for ended retention windows (normally every 30s in Serve).
func (s *Server) Expire(ctx context.Context) error { return s.expire(ctx) }
