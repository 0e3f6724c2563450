package edged

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/armor-apt/armor/store"
)

// storeProbeTimeout bounds the store check of one /healthz or /readyz request.
const storeProbeTimeout = 5 * time.Second

// probeSum is the object the store is asked about while no routes are loaded (the
// SHA-256 of no bytes): the answer, present or not, only shows that the store answers.
const probeSum = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

// feedHealth is what Sync last saw of controld's routes feed.
type feedHealth struct {
	since   atomic.Int64           // unix nanoseconds of the last good poll (or of New)
	lastErr atomic.Pointer[string] // the last poll's error; nil after a good poll
	polled  atomic.Bool            // a poll has succeeded at least once
}

func (f *feedHealth) ok(now time.Time) {
	f.since.Store(now.UnixNano())
	f.lastErr.Store(nil)
	f.polled.Store(true)
}

func (f *feedHealth) failed(err error) {
	s := err.Error()
	f.lastErr.Store(&s)
}

// componentHealth is one dependency's part of the /healthz answer.
type componentHealth struct {
	OK          bool       `json:"ok"`
	LastSuccess *time.Time `json:"last_success,omitempty"`
	Error       string     `json:"error,omitempty"`
}

// healthReport is the /healthz and /readyz answer.
type healthReport struct {
	// Status is "ok", "degraded", "no routes loaded", "catching up" or "shutting down".
	Status        string          `json:"status"`
	RoutesVersion uint64          `json:"routes_version"`
	Sites         int             `json:"sites"`
	Controld      componentHealth `json:"controld"`
	Store         componentHealth `json:"store"`
}

// healthz answers 200 with status "ok" when routes are loaded and both controld's feed
// and the store answer; otherwise 503, with status "degraded" (the edge still serves:
// its last known routes, its cached objects) or "no routes loaded" (it cannot serve),
// and the state of each dependency. It is the whole picture, for monitoring.
func (e *Edge) healthz(w http.ResponseWriter, r *http.Request) {
	rep := e.health(r.Context())
	writeHealth(w, rep, rep.Status == "ok")
}

// readyz is the load balancer's check: 200 {"status":"ok"} while this edge should take
// traffic (its routes are loaded, the store and controld answer, as for healthz), 503
// otherwise; 503 "catching up" after a start until its first poll of controld has
// ended (routes from state_dir may be older than the other edges': a client sent here
// with a newer InRelease would miss its by-hash indexes); and 503 "shutting down" from
// the moment a graceful shutdown begins, so a balancer stops sending new clients while
// the requests in flight finish.
func (e *Edge) readyz(w http.ResponseWriter, r *http.Request) {
	rep := e.health(r.Context())
	switch {
	case e.draining.Load():
		rep.Status = "shutting down"
	case rep.Status == "ok" && !e.caughtUp.Load():
		rep.Status = "catching up"
	}
	writeHealth(w, rep, rep.Status == "ok")
}

func writeHealth(w http.ResponseWriter, rep healthReport, ok bool) {
	status := http.StatusOK
	if !ok {
		status = http.StatusServiceUnavailable
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(rep)
}

// health checks the dependencies now; nothing of it is cached, so a store that moved
// shows at the next request. controld counts as unreachable once polling has failed for
// longer than Config.Poll.StaleAfter (a single failed poll is retried and is no
// outage). The store is asked (up to 5 s) for the manifest of a routed site's active
// release, a different site each time: an object that must be there, so a store that
// answers but moved or was emptied (a local directory renamed, another bucket) is seen
// as well as one that does not answer.
func (e *Edge) health(ctx context.Context) healthReport {
	rep := healthReport{Status: "ok"}
	t := e.table.Load()
	if t != nil {
		rep.RoutesVersion, rep.Sites = t.version, len(t.sites)
	}
	now := time.Now()
	since := time.Unix(0, e.feed.since.Load()).UTC()
	rep.Controld.OK = now.Sub(since) <= e.cfg.Poll.StaleAfter.D() || e.feed.lastErr.Load() == nil && e.feed.polled.Load()
	if e.feed.polled.Load() {
		rep.Controld.LastSuccess = &since
	}
	if p := e.feed.lastErr.Load(); p != nil {
		rep.Controld.Error = *p
	}
	ctx, cancel := context.WithTimeout(ctx, storeProbeTimeout)
	defer cancel()
	if err := e.probeStore(ctx, t); err != nil {
		rep.Store.Error = err.Error()
	} else {
		rep.Store.OK = true
	}
	switch {
	case t == nil:
		rep.Status = "no routes loaded"
	case !rep.Controld.OK || !rep.Store.OK:
		rep.Status = "degraded"
	}
	return rep
}

// probeStore asks the store for an object it must hold: the manifest of one routed
// site's active release (the next site at each call), or with no sites an object that
// need not exist, which shows only that the store answers.
func (e *Edge) probeStore(ctx context.Context, t *table) error {
	if t == nil || len(t.sites) == 0 {
		_, err := e.store.Has(ctx, probeSum)
		return err
	}
	s := t.sites[int(e.probeNext.Add(1)%uint64(len(t.sites)))]
	_, err := e.store.Stat(ctx, s.active.Manifest)
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("the store lacks the manifest %s of %s's active release %s: was it moved or emptied? (%w)",
			s.active.Manifest, s.repository, s.active.ID, err)
	}
	return err
}
