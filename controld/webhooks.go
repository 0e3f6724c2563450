package controld

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/armor-apt/armor/controld/api"
	"github.com/armor-apt/armor/controld/hooks"
	"github.com/armor-apt/armor/controld/state"
	"github.com/armor-apt/armor/internal/duration"
	"github.com/armor-apt/armor/manifest"
)

// Webhooks: the API that manages them (/v1/hooks), and what their bodies say. Package
// controld/hooks delivers them; the state store keeps the hooks and their deliveries,
// created in the same transaction as the change they tell of.
//
// Hooks are scoped like tokens: a hook names the repositories whose events it gets (or
// "*"), and only a token with the admin action on all of them may create, list,
// remove, ping it or read its log. A gc concerns every repository, so only a hook of
// "*" may ask for it.

// hookSecretPrefix starts every hook secret, as tokenPrefix starts tokens.
const hookSecretPrefix = "armorhook_"

// newDispatcher makes the server's webhook dispatcher from its configuration.
func (s *Server) newDispatcher() *hooks.Dispatcher {
	h := s.cfg.Hooks
	return hooks.New(hooks.Config{
		Timeout: h.Timeout.D(), MaxAttempts: h.MaxAttempts, BackoffMin: h.BackoffMin.D(), BackoffMax: h.BackoffMax.D(),
		Keep: h.Keep.D(), Logger: s.log,
	}, s.st, s.renderHook)
}

// runHooks delivers until ctx ends, woken by every change this process makes (other
// replicas' events are found by polling), and returns once the attempts in flight end.
func (s *Server) runHooks(ctx context.Context) {
	go func() {
		for {
			changed := s.changes.wait()
			select {
			case <-ctx.Done():
				return
			case <-changed:
				s.hooks.Wake()
			}
		}
	}()
	s.hooks.Run(ctx)
}

// gcEvent tells hooks of a garbage collection that ran. Its deletions were many
// transactions, so the event is one of its own, after them: a failure to append it is
// logged, since what it would tell of is done.
func (s *Server) gcEvent(ctx context.Context, by string, rep api.GCReport) {
	sum := &state.GCSummary{Objects: rep.Deleted, Bytes: rep.DeletedBytes, KeptReleases: rep.KeptReleases, Releases: []state.ReleaseRef{}}
	for _, r := range rep.Releases {
		sum.Releases = append(sum.Releases, state.ReleaseRef{Repository: r.Repository, ID: r.ID, Manifest: r.Manifest, PushedAt: r.PushedAt})
	}
	now := s.now().UTC()
	if _, _, err := s.st.AppendEvent(ctx, state.Event{Type: state.EventGC, At: now, By: by, GC: sum}, now); err != nil {
		s.log.Warn("the garbage collection's webhook event was not recorded", "err", err)
		return
	}
	s.hooks.Wake()
}

func (s *Server) createHook(c *call) error {
	if !c.isAdmin() {
		return forbidden("token %s may not admin", c.tok.Name)
	}
	var req api.CreateHookRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	h, err := checkHook(req)
	if err != nil {
		return err
	}
	if !c.within(h.Repositories) {
		return forbidden("token %s may not create a hook for repositories %v beyond its own %v", c.tok.Name, h.Repositories, c.tok.Repositories)
	}
	if h.ID, err = randomText(6, hex.EncodeToString); err != nil {
		return err
	}
	if h.Secret, err = randomText(32, base64.RawURLEncoding.EncodeToString); err != nil {
		return err
	}
	h.Secret = hookSecretPrefix + h.Secret
	h.CreatedAt, h.CreatedBy = s.now().UTC(), c.tok.Name
	if err := s.st.CreateHook(c.ctx(), h); err != nil {
		return err
	}
	s.log.Info("hook created", "hook", h.ID, "url", redactURL(h.URL), "events", h.Events, "repositories", h.Repositories, "token", c.tok.Name)
	writeJSON(c.w, http.StatusCreated, api.CreateHookResponse{Hook: toAPIHook(h), Secret: h.Secret})
	return nil
}

// checkHook validates a hook request and returns the hook it asks for, normalised.
func checkHook(req api.CreateHookRequest) (state.Hook, error) {
	u, err := url.Parse(req.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Fragment != "" {
		return state.Hook{}, badRequest("url %q: want an absolute http:// or https:// URL without a #fragment", req.URL)
	}
	if len(req.Events) == 0 {
		return state.Hook{}, badRequest("name at least one event of %s", strings.Join(api.HookEvents, ", "))
	}
	for _, e := range req.Events {
		if !slices.Contains(api.HookEvents, e) {
			return state.Hook{}, badRequest("unknown event %q (want %s)", e, strings.Join(api.HookEvents, ", "))
		}
	}
	repos, err := checkRepositories("hook", req.Repositories)
	if err != nil {
		return state.Hook{}, err
	}
	events := slices.Compact(slices.Sorted(slices.Values(req.Events)))
	if slices.Contains(events, api.EventGC) && !slices.Equal(repos, []string{api.AllRepositories}) {
		return state.Hook{}, badRequest("event gc concerns every repository: a hook asking for it must be for \"*\"")
	}
	return state.Hook{URL: u.String(), Events: events, Repositories: repos}, nil
}

// randomText returns n random bytes, encoded.
func randomText(n int, enc func([]byte) string) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("random: %w", err)
	}
	return enc(b), nil
}

// redactURL drops the password of a URL for logs (a receiver may take one in it).
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable)"
	}
	return u.Redacted()
}

// ownHook loads the request's {id} hook, if the caller may administer it.
func (s *Server) ownHook(c *call, id string) (state.Hook, error) {
	if !c.isAdmin() {
		return state.Hook{}, forbidden("token %s may not admin", c.tok.Name)
	}
	all, err := s.st.Hooks(c.ctx())
	if err != nil {
		return state.Hook{}, err
	}
	for _, h := range all {
		if h.ID != id {
			continue
		}
		if !c.within(h.Repositories) {
			return state.Hook{}, forbidden("token %s may not administer hook %s, whose repositories %v are beyond its own", c.tok.Name, id, h.Repositories)
		}
		return h, nil
	}
	return state.Hook{}, apiErrorf(http.StatusNotFound, api.CodeNotFound, "no hook %s (armor hooks list shows them)", id)
}

func (s *Server) listHooks(c *call) error {
	if !c.isAdmin() {
		return forbidden("token %s may not admin", c.tok.Name)
	}
	all, err := s.st.Hooks(c.ctx())
	if err != nil {
		return err
	}
	out := []api.Hook{}
	for _, h := range all {
		if c.within(h.Repositories) {
			out = append(out, toAPIHook(h))
		}
	}
	writeJSON(c.w, http.StatusOK, out)
	return nil
}

func (s *Server) deleteHook(c *call) error {
	h, err := s.ownHook(c, c.r.PathValue("id"))
	if err != nil {
		return err
	}
	if _, err := s.st.DeleteHook(c.ctx(), h.ID); err != nil {
		return err
	}
	s.log.Info("hook removed", "hook", h.ID, "url", redactURL(h.URL), "token", c.tok.Name)
	writeJSON(c.w, http.StatusOK, toAPIHook(h))
	return nil
}

// pingHook queues a ping to one hook, so its receiver can be checked.
func (s *Server) pingHook(c *call) error {
	h, err := s.ownHook(c, c.r.PathValue("id"))
	if err != nil {
		return err
	}
	now := s.now().UTC()
	if _, _, err := s.st.AppendEvent(c.ctx(), state.Event{Type: state.EventPing, Hook: h.ID, At: now, By: c.tok.Name}, now); err != nil {
		return err
	}
	writeJSON(c.w, http.StatusAccepted, toAPIHook(h))
	return nil
}

// hookDeliveries is the delivery log: GET /v1/hooks/deliveries?hook=ID&limit=N.
func (s *Server) hookDeliveries(c *call) error {
	if !c.isAdmin() {
		return forbidden("token %s may not admin", c.tok.Name)
	}
	q := state.DeliveryQuery{Hook: c.r.URL.Query().Get("hook"), Limit: 100}
	if v := c.r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 10000 {
			return badRequest("limit %q: want a number from 1 to 10000", v)
		}
		q.Limit = n
	}
	if q.Hook != "" {
		if _, err := s.ownHook(c, q.Hook); err != nil {
			return err
		}
	}
	all, err := s.st.Hooks(c.ctx())
	if err != nil {
		return err
	}
	mine := map[string]bool{}
	for _, h := range all {
		mine[h.ID] = c.within(h.Repositories)
	}
	ds, err := s.st.Deliveries(c.ctx(), q)
	if err != nil {
		return err
	}
	out := []api.Delivery{}
	for _, d := range ds {
		if mine[d.Hook] {
			out = append(out, toAPIDelivery(d))
		}
	}
	writeJSON(c.w, http.StatusOK, out)
	return nil
}

// redeliver makes a finished delivery pending again: POST /v1/hooks/deliveries/{id}/redeliver.
func (s *Server) redeliver(c *call) error {
	id, err := strconv.ParseUint(c.r.PathValue("id"), 10, 64)
	if err != nil {
		return badRequest("delivery %q is not a delivery id", c.r.PathValue("id"))
	}
	d, err := s.st.Delivery(c.ctx(), id)
	if errors.Is(err, state.ErrNotFound) {
		return apiErrorf(http.StatusNotFound, api.CodeNotFound, "no delivery %d (armor hooks log shows them)", id)
	}
	if err != nil {
		return err
	}
	if _, err := s.ownHook(c, d.Hook); err != nil {
		return err
	}
	// The dispatcher's clock is real time, whatever the server's: due at once.
	if d, err = s.st.Redeliver(c.ctx(), id, time.Now()); err != nil {
		return err
	}
	writeJSON(c.w, http.StatusOK, toAPIDelivery(d))
	return nil
}

func toAPIHook(h state.Hook) api.Hook {
	return api.Hook{ID: h.ID, URL: h.URL, Events: nonNil(h.Events), Repositories: nonNil(h.Repositories), CreatedAt: h.CreatedAt, CreatedBy: h.CreatedBy}
}

func toAPIDelivery(d state.Delivery) api.Delivery {
	out := api.Delivery{ID: d.ID, Hook: d.Hook, Event: d.Event.Type, EventID: d.Event.Seq, Repository: d.Event.Repository,
		State: d.State, CreatedAt: d.CreatedAt, Attempts: []api.DeliveryAttempt{}}
	if d.State == state.DeliveryPending && !d.NextAt.IsZero() {
		next := d.NextAt
		out.NextAttempt = &next
	}
	for _, a := range d.Attempts {
		out.Attempts = append(out.Attempts, api.DeliveryAttempt{At: a.At, Duration: duration.Duration(a.Duration), By: a.By,
			OK: a.OK, Status: a.Status, Error: a.Error})
	}
	if d.Lease != nil && d.State == state.DeliveryPending {
		out.InFlight = &api.DeliveryLease{By: d.Lease.By, Until: d.Lease.Until}
	}
	return out
}

// renderHook is the body of delivery d to hook h: the event, with what a receiver
// needs to act on it (the repository's hostnames; for an activation, the paths it
// changed).
func (s *Server) renderHook(ctx context.Context, h state.Hook, d state.Delivery) ([]byte, error) {
	ev := d.Event
	p := api.HookPayload{Event: ev.Type, EventID: ev.Seq, Hook: h.ID, Repository: ev.Repository, At: ev.At, By: ev.By,
		RoutesVersion: ev.RoutesVersion}
	if ev.Repository != "" {
		r, err := s.st.Repository(ctx, ev.Repository)
		if err != nil {
			return nil, fmt.Errorf("repository %s: %w", ev.Repository, err)
		}
		p.Hostnames = nonNil(r.Hostnames)
	}
	if ev.Release != nil {
		rel := toAPIRelease(*ev.Release)
		p.Release = &rel
	}
	if ev.Activation != nil {
		a := toAPIActivation(*ev.Activation)
		p.Activation = &a
		var err error
		if p.ChangedPaths, p.ChangedPathsTruncated, err = s.changedPaths(ctx, *ev.Activation, ev.Release); err != nil {
			return nil, err
		}
	}
	if k := ev.Key; k != nil {
		p.Key = &api.KeyChange{Action: k.Action, Fingerprint: k.Fingerprint, UserIDs: k.UserIDs}
	}
	if g := ev.GC; g != nil {
		p.GC = &api.GCSummary{Objects: g.Objects, Bytes: g.Bytes, KeptReleases: g.KeptReleases, Releases: []api.GCRelease{}}
		for _, r := range g.Releases {
			p.GC.Releases = append(p.GC.Releases, api.GCRelease{Repository: r.Repository, ID: r.ID, Manifest: r.Manifest, PushedAt: r.PushedAt})
		}
	}
	return json.Marshal(p)
}

// changedPaths lists the paths activation a changed (see api.HookPayload), comparing
// the manifests of the release it deactivated and of to, the release it activated. A
// deactivated release that is no longer recorded (collected since) counts as empty:
// every path then counts as changed.
func (s *Server) changedPaths(ctx context.Context, a state.Activation, to *state.Release) ([]string, bool, error) {
	if to == nil {
		return nil, false, nil
	}
	var oldSum string
	if a.From != "" {
		from, err := s.st.Release(ctx, a.Repository, a.From)
		switch {
		case err == nil:
			oldSum = from.Manifest
		case !errors.Is(err, state.ErrNotFound):
			return nil, false, err
		}
	}
	return s.diffs.paths(ctx, s, oldSum, to.Manifest)
}

// pathDiffs remembers the last few manifest comparisons: an activation's paths are
// needed once per hook, and again at each retry.
type pathDiffs struct {
	mu   sync.Mutex
	last []pathDiff
}

type pathDiff struct {
	from, to  string
	paths     []string
	truncated bool
}

const pathDiffsKept = 8

func (pd *pathDiffs) paths(ctx context.Context, s *Server, from, to string) ([]string, bool, error) {
	pd.mu.Lock()
	for _, d := range pd.last {
		if d.from == from && d.to == to {
			pd.mu.Unlock()
			return d.paths, d.truncated, nil
		}
	}
	pd.mu.Unlock()
	newM, err := s.loadManifest(ctx, to)
	if err != nil {
		return nil, false, err
	}
	var oldPaths map[string]manifest.Object
	if from != "" {
		// A manifest collected since counts as empty; a store that does not answer
		// fails the attempt, which is retried.
		there, err := s.store.Has(ctx, from)
		if err != nil {
			return nil, false, err
		}
		if there {
			old, err := s.loadManifest(ctx, from)
			if err != nil {
				return nil, false, err
			}
			oldPaths = old.Paths()
		}
	}
	paths, truncated := diffPaths(oldPaths, newM.Paths())
	pd.mu.Lock()
	pd.last = append(pd.last, pathDiff{from: from, to: to, paths: paths, truncated: truncated})
	if len(pd.last) > pathDiffsKept {
		pd.last = pd.last[1:]
	}
	pd.mu.Unlock()
	return paths, truncated, nil
}

// diffPaths returns the sorted paths whose object differs between old and new (added,
// removed or changed), but by-hash/ paths, cut at api.MaxChangedPaths.
func diffPaths(old, new map[string]manifest.Object) ([]string, bool) {
	var out []string
	for p, o := range new {
		if prev, ok := old[p]; (!ok || prev != o) && !strings.Contains(p, "/by-hash/") {
			out = append(out, p)
		}
	}
	for p := range old {
		if _, ok := new[p]; !ok && !strings.Contains(p, "/by-hash/") {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	if len(out) > api.MaxChangedPaths {
		return out[:api.MaxChangedPaths], true
	}
	return out, false
}
