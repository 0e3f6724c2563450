package controld

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/armor-apt/armor/controld/api"
	"github.com/armor-apt/armor/controld/state"
)

// expiryInterval is how often the server looks for retention windows that ended.
const expiryInterval = 30 * time.Second

// notifier wakes every waiter when something changed.
type notifier struct {
	mu sync.Mutex
	ch chan struct{}
}

func (n *notifier) init() { n.ch = make(chan struct{}) }

// wait returns a channel closed at the next broadcast. Take it before reading the
// state, so a change in between is not missed.
func (n *notifier) wait() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.ch
}

func (n *notifier) broadcast() {
	n.mu.Lock()
	defer n.mu.Unlock()
	close(n.ch)
	n.ch = make(chan struct{})
}

// changeWatcher is a state store shared by several processes that tells of changes
// any of them made (PostgreSQL, through LISTEN/NOTIFY). Serve runs Watch so that a
// routes long poll on one replica wakes when another replica flips.
type changeWatcher interface {
	// Watch calls changed after each change until ctx ends, and onError on each
	// failure to listen (it keeps retrying).
	Watch(ctx context.Context, changed func(), onError func(error))
}

// routes serves the routes feed: at once without If-None-Match or when the version
// differs from it, else after the version changes or 304 when wait seconds pass.
func (s *Server) routes(c *call) error {
	wait, err := api.RoutesWait(c.r.URL.Query())
	if err != nil {
		return badRequest("%v", err)
	}
	inm := c.r.Header.Get("If-None-Match")
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		changed := s.changes.wait()
		snap, err := s.st.Snapshot(c.ctx())
		if err != nil {
			return err
		}
		c.w.Header().Set("ETag", api.RoutesETag(snap.Version))
		c.w.Header().Set("Cache-Control", "no-cache")
		if !api.RoutesUnchanged(inm, snap.Version) {
			writeJSON(c.w, http.StatusOK, s.buildRoutes(c, snap))
			return nil
		}
		select {
		case <-changed:
			continue
		case <-timer.C:
		case <-s.quit:
		case <-c.ctx().Done():
		}
		c.w.WriteHeader(http.StatusNotModified)
		return nil
	}
}

// buildRoutes renders a snapshot for a token: only the repositories it may read.
func (s *Server) buildRoutes(c *call, snap state.Snapshot) api.Routes {
	now := s.now().UTC()
	out := api.Routes{Version: snap.Version, GeneratedAt: now, Sites: []api.Site{}}
	for _, r := range snap.Repositories {
		if !c.can(r.Name, api.ActionRead) {
			continue
		}
		site := api.Site{Repository: r.Name, Hostnames: nonNil(r.Hostnames), Retained: retained(r, now)}
		for _, k := range r.Keys {
			site.Keys = append(site.Keys, k.Armored)
		}
		if r.Active != nil {
			site.Active = &api.RouteActive{ID: r.Active.Release, Manifest: r.Active.Manifest, ActivatedAt: r.Active.At}
		}
		out.Sites = append(out.Sites, site)
	}
	return out
}

// retained lists the releases of r deactivated within its retention window, latest
// deactivation first.
func retained(r state.Repository, now time.Time) []api.Retained {
	out := []api.Retained{}
	for _, x := range r.Retired {
		until := x.DeactivatedAt.Add(r.Retention)
		if until.After(now) {
			out = append(out, api.Retained{ID: x.Release, Manifest: x.Manifest, Until: until.UTC(), DeactivatedAt: x.DeactivatedAt.UTC()})
		}
	}
	return out
}

// expiryWatch remembers when retention windows were last looked at.
type expiryWatch struct {
	mu   sync.Mutex
	last time.Time
}

// expire bumps the routes version when a retention window ended since the last look,
// so that edges polling with the old version learn that a release left `retained`.
func (s *Server) expire(ctx context.Context) error {
	s.expiry.mu.Lock()
	defer s.expiry.mu.Unlock()
	now := s.now()
	snap, err := s.st.Snapshot(ctx)
	if err != nil {
		return err
	}
	ended := false
	for _, r := range snap.Repositories {
		for _, x := range r.Retired {
			until := x.DeactivatedAt.Add(r.Retention)
			if until.After(s.expiry.last) && !until.After(now) {
				ended = true
			}
		}
	}
	s.expiry.last = now
	if !ended {
		return nil
	}
	if _, err := s.st.BumpVersion(ctx); err != nil {
		return err
	}
	s.changes.broadcast()
	return nil
}

func (s *Server) watchExpiry(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if err := s.expire(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("check retention windows", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
