package edged

import (
	"context"
	"encoding/json"
	"net/http"
	"sync/atomic"
	"time"
)

// storeProbeTimeout bounds the store check of one /healthz request.
const storeProbeTimeout = 5 * time.Second

// probeSum is the object /healthz asks the store about (the SHA-256 of no bytes): the
// answer, present or not, only shows that the store answers.
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

// healthReport is the /healthz answer.
type healthReport struct {
	Status        string          `json:"status"` // "ok", "degraded" or "no routes loaded"
	RoutesVersion uint64          `json:"routes_version"`
	Sites         int             `json:"sites"`
	Controld      componentHealth `json:"controld"`
	Store         componentHealth `json:"store"`
}

// healthz answers 200 with status "ok" when routes are loaded and both controld's feed
// and the store answer; otherwise 503, with status "degraded" (the edge still serves:
// its last known routes, its cached objects) or "no routes loaded" (it cannot serve),
// and the state of each dependency. controld counts as unreachable once polling has
// failed for longer than Config.Poll.StaleAfter (a single failed poll is retried and is
// no outage); the store is asked at once whether an object exists (up to 5 s).
func (e *Edge) healthz(w http.ResponseWriter, r *http.Request) {
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
	ctx, cancel := context.WithTimeout(r.Context(), storeProbeTimeout)
	defer cancel()
	if _, err := e.store.Has(ctx, probeSum); err != nil {
		rep.Store.Error = err.Error()
	} else {
		rep.Store.OK = true
	}
	status := http.StatusOK
	switch {
	case t == nil:
		rep.Status, status = "no routes loaded", http.StatusServiceUnavailable
	case !rep.Controld.OK || !rep.Store.OK:
		rep.Status, status = "degraded", http.StatusServiceUnavailable
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(rep)
}
