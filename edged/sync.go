package edged

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/armor-apt/armor/controld/api"
	"github.com/armor-apt/armor/store"
)

// errNotModified: controld's long poll ended without a change.
var errNotModified = errors.New("routes not modified")

// Sync keeps the edge's routes in step with controld until ctx is cancelled (then it
// returns nil). It long-polls the routes feed, so a flip is seen within about a
// second; on each new version it loads the manifests, pre-warms the new releases'
// index files, persists the routes and swaps the routing table. On any error it keeps
// serving the last known routes and retries with exponential backoff (with jitter).
// Only one Sync may run at a time.
func (e *Edge) Sync(ctx context.Context) error {
	minB, maxB := e.cfg.Poll.BackoffMin.D(), e.cfg.Poll.BackoffMax.D()
	backoff := minB
	for {
		start := time.Now()
		err := e.syncOnce(ctx)
		if ctx.Err() != nil {
			return nil
		}
		e.caughtUp.Store(true)
		switch {
		case err == nil:
			backoff = minB
			continue
		case errors.Is(err, errNotModified):
			backoff = minB
			// A controld that ignores wait= must not make this loop spin.
			if time.Since(start) < time.Second {
				sleepCtx(ctx, minB)
			}
			continue
		}
		e.m.pollErrors.Inc()
		e.logger.Warn("routes sync failed; serving the last known routes", "err", err, "retry_in", backoff)
		sleepCtx(ctx, backoff/2+rand.N(backoff/2+1))
		backoff = min(2*backoff, maxB)
	}
}

// sleepCtx sleeps for d or until ctx is done.
func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// syncOnce polls once and applies what changed.
func (e *Edge) syncOnce(ctx context.Context) error {
	r, err := e.poll(ctx)
	switch {
	case err == nil || errors.Is(err, errNotModified):
		e.feed.ok(time.Now())
	case ctx.Err() == nil:
		e.feed.failed(err)
	}
	t := e.table.Load()
	if t != nil && (errors.Is(err, errNotModified) || err == nil && r.Version == t.version) {
		// Still current: a flip missed later can only be later than now.
		for _, s := range t.sites {
			s.routes.confirmed.Store(time.Now().UnixNano())
		}
		return errNotModified
	}
	if err != nil {
		return err
	}
	return e.apply(ctx, r, time.Now(), true, true)
}

// poll fetches the routes feed: at once when no routes are loaded or none has been
// confirmed by controld since the edge started (it asks whether those from state_dir
// are current), else as a long poll that returns errNotModified when the version did
// not change.
func (e *Edge) poll(ctx context.Context) (*api.Routes, error) {
	var since uint64
	var wait time.Duration
	if cur := e.table.Load(); cur != nil {
		since = cur.version
		if e.feed.polled.Load() {
			wait = e.cfg.Poll.Wait.D()
		}
	}
	ctx, cancel := context.WithTimeout(ctx, wait+30*time.Second)
	defer cancel()
	// Replicas of controld (a comma-separated list) are polled one at a time; one that
	// does not answer, or answers 5xx, passes the next poll to the next replica. Every
	// replica's feed wakes on any replica's flip (LISTEN/NOTIFY), so any will do.
	replicas := controldURLs(e.cfg.Controld)
	n := e.replica.Load()
	base := replicas[int(n%uint64(len(replicas)))]
	next := func() { e.replica.CompareAndSwap(n, n+1) }
	req, err := api.NewRoutesRequest(ctx, base, e.token, since, wait)
	if err != nil {
		return nil, fmt.Errorf("poll routes: %w", err)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		next()
		return nil, fmt.Errorf("poll routes from %s: %w", base, err)
	}
	defer resp.Body.Close()
	r, notModified, err := api.ReadRoutes(resp)
	var se *api.StatusError
	switch {
	case notModified:
		return nil, errNotModified
	case errors.As(err, &se) && (se.Status == http.StatusUnauthorized || se.Status == http.StatusForbidden):
		return nil, fmt.Errorf("poll routes from %s: controld refused the token (%w): check %s or token_file", base, err, TokenEnv)
	case err != nil:
		if !errors.As(err, &se) || se.Status >= 500 {
			next()
		}
		return nil, fmt.Errorf("poll routes from %s: %w", base, err)
	}
	return r, nil
}

// controldURLs splits the controld setting into the replicas' URLs.
func controldURLs(s string) []string {
	var out []string
	for _, u := range strings.Split(s, ",") {
		if u = strings.TrimSpace(u); u != "" {
			out = append(out, u)
		}
	}
	if len(out) == 0 {
		out = []string{""}
	}
	return out
}

// apply makes r the served routes: it loads every manifest r needs, builds the new
// path maps (reusing unchanged ones, carrying dates from the previous ones), pre-warms
// the index files of new active releases when warm is set, keeps r and the new maps'
// dates on disk when save is set, and only then swaps the table. seen is when r was
// known to be current. On error nothing changes.
func (e *Edge) apply(ctx context.Context, r *api.Routes, seen time.Time, save, warm bool) error {
	e.applyMu.Lock()
	defer e.applyMu.Unlock()
	now := time.Now()
	needed, err := e.loadNeeded(ctx, r, now)
	if err != nil {
		return err
	}
	old := map[string]*routeMap{}
	oldPages := map[string]*pageSite{}
	if t := e.table.Load(); t != nil {
		for _, s := range t.sites {
			old[s.repository] = s.routes
			oldPages[s.repository] = s.page
		}
	}
	next := &table{version: r.Version, hosts: map[string]*site{}}
	var fresh []*release
	rebuilt := map[string]*routeMap{}
	var repos []string
	for _, fs := range r.Sites {
		if fs.Active == nil || len(fs.Hostnames) == 0 {
			continue
		}
		repos = append(repos, fs.Repository)
		rm := old[fs.Repository]
		if rm == nil || rm.key != routesKey(fs, now) {
			rm = buildRoutes(fs, e.releases, now, e.previousDates(rm, fs.Repository))
			fresh = append(fresh, e.releases[fs.Active.Manifest])
			rebuilt[fs.Repository] = rm
		}
		s := &site{repository: fs.Repository, name: fs.Hostnames[0], active: *fs.Active, routes: rm,
			page: newPageSite(fs.Keys, rm, oldPages[fs.Repository], now)}
		var err error
		if s.extra, err = keyringRoutes(fs.Repository, fs.Keys); err != nil {
			e.logger.Warn("a public key of the routes feed is not served", "err", err)
		}
		for _, r := range s.extra {
			// The keyrings change with the keys: dated as the page is, from when this edge
			// first served them, so wget -N does not fetch them again with every sync.
			r.modTime, r.settled = s.page.since, s.page.since+settleSeconds
			r.lastModified = []byte(time.Unix(s.page.since, 0).UTC().Format(http.TimeFormat))
		}
		next.sites = append(next.sites, s)
		for _, h := range fs.Hostnames {
			next.hosts[h] = s
		}
	}
	if warm {
		if err := e.prewarm(ctx, fresh); err != nil {
			return err
		}
	}
	if save && e.cfg.StateDir != "" {
		if err := e.saveState(r, needed); err != nil {
			e.logger.Warn("routes could not be kept on disk; serving them anyway", "err", err)
		}
	}
	var seenNano int64 // zero time: never confirmed
	if !seen.IsZero() {
		seenNano = seen.UnixNano()
	}
	for _, s := range next.sites {
		s.routes.confirmed.Store(seenNano)
	}
	if save { // routes from controld, not from state_dir: current as they become visible
		e.caughtUp.Store(true)
	}
	e.table.Store(next)
	e.m.setRoutes(next)
	if save && e.cfg.StateDir != "" {
		// After the swap: dates are checked against each path's digest when read back,
		// so they need not be on disk before the routes that use them, and a large
		// repository's dates must not delay its flip.
		for repo, rm := range rebuilt {
			if err := saveDates(e.cfg.StateDir, repo, rm, now); err != nil {
				e.logger.Warn("dates could not be kept on disk; serving them anyway", "err", err)
			}
		}
		if err := pruneDates(e.cfg.StateDir, repos); err != nil {
			e.logger.Warn("dates of repositories no longer routed could not be removed", "err", err)
		}
	}
	for sum := range e.releases {
		if !needed[sum] {
			delete(e.releases, sum)
		}
	}
	e.logger.Info("routes applied", "version", r.Version, "sites", len(next.sites), "new_releases", len(fresh))
	return nil
}

// loadNeeded loads the manifest of every release r serves: each site's active release
// and its retained releases still within their time. It returns the manifests' digests.
func (e *Edge) loadNeeded(ctx context.Context, r *api.Routes, now time.Time) (map[string]bool, error) {
	needed := map[string]bool{}
	for _, s := range r.Sites {
		if s.Active == nil {
			continue
		}
		if err := e.need(ctx, s.Repository, s.Active.ID, s.Active.Manifest, needed); err != nil {
			return nil, err
		}
		for _, x := range s.Retained {
			if !x.Until.After(now) {
				continue
			}
			err := e.need(ctx, s.Repository, x.ID, x.Manifest, needed)
			switch {
			case errors.Is(err, store.ErrNotFound):
				// Its objects may be collected too; serve what is left without it.
				e.logger.Warn("retained release's manifest is not in the store; its by-hash and pool paths are not served",
					"repository", s.Repository, "release", x.ID, "err", err)
			case err != nil:
				return nil, err
			}
		}
	}
	return needed, nil
}

// previousDates is where a repository's new routing map carries its dates from: its
// previous map, or failing that the dates kept on disk.
func (e *Edge) previousDates(old *routeMap, repo string) *dateSource {
	if old != nil {
		return datesOf(old)
	}
	if e.cfg.StateDir == "" {
		return nil
	}
	d, err := loadDates(e.cfg.StateDir, repo)
	if err != nil {
		e.logger.Warn("kept dates are not used; paths are dated from the activation", "err", err)
	}
	return d
}

// need loads (if not yet loaded) the manifest of a release and checks it is the
// release the feed names, of the repository it is routed for.
func (e *Edge) need(ctx context.Context, repo, id, sum string, needed map[string]bool) error {
	rel := e.releases[sum]
	if rel == nil {
		var err error
		if rel, err = e.loadRelease(ctx, sum); err != nil {
			return err
		}
		e.releases[sum] = rel
	}
	if rel.m.ID != id || rel.m.Repository != repo {
		return fmt.Errorf("manifest %s is release %s of %s, but the routes name it release %s of %s", sum, rel.m.ID, rel.m.Repository, id, repo)
	}
	needed[sum] = true
	return nil
}

// prewarmConcurrency bounds parallel store fetches while pre-warming.
const prewarmConcurrency = 8

// prewarm loads the index files of the given releases (Release, InRelease,
// Release.gpg, Packages*) into the cache, so the first clients after a flip hit.
func (e *Edge) prewarm(ctx context.Context, rels []*release) error {
	g, _ := errgroup.WithContext(ctx)
	g.SetLimit(prewarmConcurrency)
	seen := map[string]bool{}
	for _, rel := range rels {
		for _, f := range rel.m.Files {
			if !warmable(f.Path) || f.Size > e.threshold || seen[f.SHA256] || e.objects.cached(f.SHA256) {
				continue
			}
			seen[f.SHA256] = true
			g.Go(func() error {
				if _, err := e.objects.fill(cacheKey(f.SHA256), f.SHA256, f.Size); err != nil {
					return fmt.Errorf("pre-warm %s of release %s: %w", f.Path, rel.m.ID, err)
				}
				return nil
			})
		}
	}
	return g.Wait()
}
