package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// Watch calls changed whenever the routes version may have changed in any process
// sharing the database: on each NOTIFY armor_routes, and after each (re)connection of
// its listening connection, since notifications sent while it was away are lost. It
// returns when ctx ends. A lost connection is retried every retry interval (1s up to
// 30s); onError, when not nil, hears of each failure.
func (s *Store) Watch(ctx context.Context, changed func(), onError func(error)) {
	backoff := time.Second
	for ctx.Err() == nil {
		err := s.listen(ctx, changed, func() { backoff = time.Second })
		if ctx.Err() != nil {
			return
		}
		if onError != nil {
			onError(classify(err))
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 30*time.Second)
	}
}

// listen holds one connection listening on the channel until it fails.
func (s *Store) listen(ctx context.Context, changed, connected func()) error {
	conn, err := pgx.ConnectConfig(ctx, s.cfg.Copy())
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+channel); err != nil {
		return err
	}
	connected()
	changed()
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return err
		}
		changed()
	}
}
