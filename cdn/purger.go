package cdn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/armor-apt/armor/controld/api"
)

// maxBody bounds a webhook body (2,000 paths and a release fit many times over).
const maxBody = 8 << 20

// Config configures a Purger.
type Config struct {
	// Secret is the hook's secret, as armor hooks add printed it.
	Secret string
	// Targets lists where PURGE (and BAN) requests go: the base URL of a Varnish server
	// (http://varnish:6081), or a URL with "{host}" in it, replaced by each hostname
	// (https://{host} sends each purge to the hostname itself, as Fastly takes them).
	Targets []string
	// Headers are added to every purge request (Fastly-Key for Fastly's authenticated
	// purging).
	Headers http.Header
	// Edges lists the edges' admin base URLs (http://edge:9090), whose /readyz the
	// purger waits on; none: purge at once.
	Edges []string
	// Wait bounds the wait for the edges (default 30s): an edge that does not get there
	// in time (down, or out of the balancer's pool) is not waited for.
	Wait   time.Duration
	Client *http.Client
	Logger *slog.Logger
}

// Purger receives controld's webhooks and purges the CDN.
type Purger struct {
	cfg Config
}

// New checks cfg and returns a purger.
func New(cfg Config) (*Purger, error) {
	if cfg.Secret == "" {
		return nil, errors.New("cdn purger: no hook secret: the secret armor hooks add printed")
	}
	if len(cfg.Targets) == 0 {
		return nil, errors.New("cdn purger: nowhere to send purges: name a Varnish server (or https://{host})")
	}
	if cfg.Wait <= 0 {
		cfg.Wait = 30 * time.Second
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: 10 * time.Second}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Purger{cfg: cfg}, nil
}

// ServeHTTP receives one delivery: 204 once it is handled (or needs nothing), 401 for
// a bad signature, 400 for a body that is no payload, 502 when a purge failed (then
// controld retries).
func (p *Purger) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST controld's webhooks here", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		http.Error(w, "read body: "+err.Error(), http.StatusBadRequest)
		return
	}
	if err := api.VerifyHook(p.cfg.Secret, body, r.Header.Get(api.HeaderHookSignature)); err != nil {
		p.cfg.Logger.Warn("webhook refused", "delivery", r.Header.Get(api.HeaderHookDelivery), "err", err)
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	var ev api.HookPayload
	if err := json.Unmarshal(body, &ev); err != nil {
		http.Error(w, "body: "+err.Error(), http.StatusBadRequest)
		return
	}
	n, err := p.Handle(r.Context(), ev)
	if err != nil {
		p.cfg.Logger.Warn("purge failed; controld will deliver the event again", "event", ev.Event, "event_id", ev.EventID, "err", err)
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	if n > 0 {
		p.cfg.Logger.Info("purged", "event", ev.Event, "event_id", ev.EventID, "repository", ev.Repository, "requests", n)
	}
	w.WriteHeader(http.StatusNoContent)
}

// Handle purges what ev changed and returns how many purge requests it sent.
func (p *Purger) Handle(ctx context.Context, ev api.HookPayload) (int, error) {
	var urls []string
	ban := false
	switch ev.Event {
	case api.EventActivate, api.EventRollback:
		// The list is sorted and cut at its end: dists/ comes before pool/, so a list cut
		// within pool/ lacks only paths that are never purged. Otherwise ban.
		urls = Paths(ev.ChangedPaths)
		n := len(ev.ChangedPaths)
		ban = ev.ChangedPathsTruncated && (n == 0 || !strings.HasPrefix(ev.ChangedPaths[n-1], "pool/"))
	case api.EventKey:
		urls = []string{"/", "/" + ev.Repository + "-archive-keyring.gpg", "/" + ev.Repository + "-archive-keyring.asc"}
	default:
		return 0, nil
	}
	if len(ev.Hostnames) == 0 {
		return 0, nil
	}
	p.waitEdges(ctx, ev.RoutesVersion)
	n := 0
	for _, base := range p.cfg.Targets {
		for _, host := range ev.Hostnames {
			if ban {
				if err := p.send(ctx, "BAN", base, host, "/"); err != nil {
					return n, err
				}
				n++
				continue
			}
			for _, u := range urls {
				if err := p.send(ctx, "PURGE", base, host, u); err != nil {
					return n, err
				}
				n++
			}
		}
	}
	return n, nil
}

// Paths returns the URLs to purge for an activation that changed paths: each mutable
// path (not by-hash/ or pool/, which never change), the directory listing above every
// changed path, and the repository page "/", sorted.
func Paths(changed []string) []string {
	set := map[string]bool{"/": true}
	for _, p := range changed {
		if !Immutable(p) {
			set["/"+p] = true
		}
		for dir := path.Dir(p); dir != "." && dir != "/"; dir = path.Dir(dir) {
			set["/"+dir+"/"] = true
		}
	}
	out := make([]string, 0, len(set))
	for u := range set {
		out = append(out, u)
	}
	slices.Sort(out)
	return out
}

// Immutable reports whether edged serves path as immutable (by-hash/ and pool/).
func Immutable(p string) bool {
	return strings.HasPrefix(p, "pool/") || strings.Contains(p, "/by-hash/")
}

// send sends one PURGE or BAN of host's path to a target.
func (p *Purger) send(ctx context.Context, method, base, host, path string) error {
	base = strings.ReplaceAll(base, "{host}", host)
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(base, "/")+path, nil)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	req.Host = host
	for k, vs := range p.cfg.Headers {
		req.Header[k] = vs
	}
	resp, err := p.cfg.Client.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s%s at %s: %w", method, host, path, base, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s%s at %s: %s", method, host, path, base, resp.Status)
	}
	return nil
}

// waitEdges waits until every edge that answers reports routes version v or later, or
// Config.Wait passes; an edge that does not answer is not waited for.
func (p *Purger) waitEdges(ctx context.Context, v uint64) {
	if v == 0 || len(p.cfg.Edges) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, p.cfg.Wait)
	defer cancel()
	pending := slices.Clone(p.cfg.Edges)
	for len(pending) > 0 {
		pending = slices.DeleteFunc(pending, func(edge string) bool {
			got, ok := p.edgeVersion(ctx, edge)
			return !ok || got >= v // an edge that does not answer is out of the pool
		})
		if len(pending) == 0 {
			return
		}
		select {
		case <-ctx.Done():
			p.cfg.Logger.Warn("purging before every edge serves the change", "routes_version", v, "edges", pending)
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// edgeVersion returns the routes version an edge's /readyz reports; ok is false when
// the edge does not answer.
func (p *Purger) edgeVersion(ctx context.Context, edge string) (v uint64, ok bool) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(edge, "/")+"/readyz", nil)
	if err != nil {
		return 0, false
	}
	resp, err := p.cfg.Client.Do(req)
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	var rep struct {
		RoutesVersion uint64 `json:"routes_version"`
	}
	if json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&rep) != nil {
		return 0, false
	}
	return rep.RoutesVersion, true
}
