package controld

import (
	"context"
	"time"
)

// Interrupted uploads. On a store whose uploads are not atomic (the local backend, sftp),
// a Put writes a temporary file under tmp/ and renames it into place; a push killed
// midway leaves that file behind, and nothing else ever removes it. controld, the one
// long-running process that holds the store, removes those older than tempAge.
const (
	// tempAge is far longer than any upload takes, so an upload in progress is never cut.
	tempAge           = 24 * time.Hour
	tempCleanInterval = time.Hour
)

// tempCleaner is a store that can leave temporary uploads behind (store.Rclone).
type tempCleaner interface {
	CleanTemp(ctx context.Context, age time.Duration) (int, error)
}

// cleanTemp removes stale temporary uploads now and then every interval, until ctx ends.
func (s *Server) cleanTemp(ctx context.Context, every time.Duration) {
	c, ok := s.store.(tempCleaner)
	if !ok {
		return
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		n, err := c.CleanTemp(ctx, tempAge)
		switch {
		case err != nil && ctx.Err() == nil:
			s.log.Warn("remove interrupted uploads from the store", "store", s.store, "err", err)
		case n > 0:
			s.log.Info("removed interrupted uploads from the store", "store", s.store, "files", n, "older_than", tempAge)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
