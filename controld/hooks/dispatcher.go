package hooks

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/armor-apt/armor/controld/api"
	"github.com/armor-apt/armor/controld/state"
)

// Defaults of Config.
const (
	DefaultTimeout     = 10 * time.Second
	DefaultMaxAttempts = 12
	DefaultBackoffMin  = 10 * time.Second
	DefaultBackoffMax  = time.Hour
	DefaultKeep        = 30 * 24 * time.Hour
	DefaultWorkers     = 4
	defaultPoll        = time.Second
	pruneEvery         = time.Hour
	// maxErrorBody is how much of a failed answer's body the log keeps.
	maxErrorBody = 256
)

// Outbox is what the Dispatcher needs of the state store.
type Outbox interface {
	Hooks(ctx context.Context) ([]state.Hook, error)
	ClaimDeliveries(ctx context.Context, c state.Claim) ([]state.Delivery, error)
	FinishDelivery(ctx context.Context, id uint64, token string, a state.Attempt, retry time.Time) (state.Delivery, error)
	PruneDeliveries(ctx context.Context, before time.Time) (int, error)
}

// Renderer returns the JSON body of a delivery to hook h. It must give the same bytes
// each time it is asked about one delivery, as long as the state it reads stays.
type Renderer func(ctx context.Context, h state.Hook, d state.Delivery) ([]byte, error)

// Config tunes a Dispatcher; zero fields take their defaults.
type Config struct {
	// Timeout bounds one attempt: connecting, sending and the receiver's answer.
	Timeout time.Duration
	// MaxAttempts is how many attempts a delivery gets before it is failed.
	MaxAttempts int
	// BackoffMin is the wait after the first failed attempt; each failure doubles it,
	// up to BackoffMax (with up to a tenth of jitter).
	BackoffMin, BackoffMax time.Duration
	// Keep is how long finished deliveries stay in the log.
	Keep time.Duration
	// Workers bounds the attempts in flight in this process.
	Workers int
	// Poll is how often due deliveries are looked for when nothing woke the dispatcher
	// (retries fall due, other replicas' events).
	Poll time.Duration
	// Name is this process in leases and the log (default host/pid).
	Name   string
	Client *http.Client
	Logger *slog.Logger
	// Now is the clock of leases and retries (default time.Now).
	Now func() time.Time
}

func (c Config) withDefaults() Config {
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = DefaultMaxAttempts
	}
	if c.BackoffMin <= 0 {
		c.BackoffMin = DefaultBackoffMin
	}
	if c.BackoffMax < c.BackoffMin {
		c.BackoffMax = max(DefaultBackoffMax, c.BackoffMin)
	}
	if c.Keep <= 0 {
		c.Keep = DefaultKeep
	}
	if c.Workers <= 0 {
		c.Workers = DefaultWorkers
	}
	if c.Poll <= 0 {
		c.Poll = defaultPoll
	}
	if c.Name == "" {
		host, _ := os.Hostname()
		c.Name = host + "/" + strconv.Itoa(os.Getpid())
	}
	if c.Client == nil {
		c.Client = &http.Client{}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Dispatcher makes the deliveries of one process.
type Dispatcher struct {
	cfg    Config
	out    Outbox
	render Renderer
	client *http.Client
	wake   chan struct{}
}

// New returns a dispatcher over out; Run starts it.
func New(cfg Config, out Outbox, render Renderer) *Dispatcher {
	cfg = cfg.withDefaults()
	client := *cfg.Client
	client.Timeout = 0 // each attempt has its own deadline
	// A redirect is an answer, not a success: following it could POST the event to a
	// URL nobody registered.
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &Dispatcher{cfg: cfg, out: out, render: render, client: &client, wake: make(chan struct{}, 1)}
}

// Name is how this dispatcher signs its leases and attempts.
func (d *Dispatcher) Name() string { return d.cfg.Name }

// Lease is how long a claim lasts: one attempt (Timeout) with room to render the body
// before it and record the outcome after.
func (d *Dispatcher) Lease() time.Duration { return 2*d.cfg.Timeout + 5*time.Second }

// Wake makes Run look for due deliveries now (after a change that may have made some).
func (d *Dispatcher) Wake() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// Run delivers until ctx ends, then waits for the attempts in flight (each bounded by
// the timeout) and returns.
func (d *Dispatcher) Run(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	sem := make(chan struct{}, d.cfg.Workers)
	poll := time.NewTicker(d.cfg.Poll)
	defer poll.Stop()
	lastPrune := time.Time{}
	failures := 0
	for {
		if time.Since(lastPrune) > pruneEvery {
			lastPrune = time.Now()
			d.prune(ctx)
		}
		more := false
		if free := d.cfg.Workers - len(sem); free > 0 && ctx.Err() == nil {
			ds, err := d.out.ClaimDeliveries(ctx, state.Claim{By: d.cfg.Name, Now: d.cfg.Now(), Lease: d.Lease(), Limit: free})
			switch {
			case err != nil && ctx.Err() == nil:
				failures++
				if failures == 1 || failures%60 == 0 {
					d.cfg.Logger.Warn("claim webhook deliveries", "err", err, "failures", failures)
				}
			case err == nil:
				failures = 0
			}
			for _, dl := range ds {
				sem <- struct{}{}
				wg.Add(1)
				go func() {
					defer wg.Done()
					d.attempt(dl)
					<-sem
					d.Wake()
				}()
			}
			more = len(ds) == free
		}
		if more {
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-d.wake:
		case <-poll.C:
		}
	}
}

// prune drops finished deliveries older than Keep.
func (d *Dispatcher) prune(ctx context.Context) {
	n, err := d.out.PruneDeliveries(ctx, d.cfg.Now().Add(-d.cfg.Keep))
	switch {
	case err != nil && ctx.Err() == nil:
		d.cfg.Logger.Warn("prune the webhook delivery log", "err", err)
	case n > 0:
		d.cfg.Logger.Info("webhook delivery log pruned", "deliveries", n, "older_than", d.cfg.Keep)
	}
}

// attempt makes one attempt at dl and records it. It does not depend on Run's context:
// a shutdown lets the attempt finish within the timeout rather than leave the lease
// to expire.
func (d *Dispatcher) attempt(dl state.Delivery) {
	ctx, cancel := context.WithTimeout(context.Background(), d.Lease()-time.Second)
	defer cancel()
	log := d.cfg.Logger.With("delivery", dl.ID, "hook", dl.Hook, "event", dl.Event.Type, "event_id", dl.Event.Seq)
	h, err := d.hook(ctx, dl.Hook)
	if err != nil {
		log.Warn("webhook delivery not attempted: its hook could not be read", "err", err)
		return // the lease expires and the delivery is claimed again
	}
	start := d.cfg.Now()
	a := state.Attempt{At: start.UTC(), By: d.cfg.Name}
	if h == nil {
		return // deleted meanwhile, with its deliveries
	}
	a.Status, err = d.post(ctx, *h, dl)
	a.Duration = d.cfg.Now().Sub(start)
	a.OK = err == nil
	var retry time.Time
	if err != nil {
		a.Error = err.Error()
		if n := len(dl.Attempts) + 1; n < d.cfg.MaxAttempts {
			retry = d.cfg.Now().Add(d.backoff(n))
		}
	}
	if _, ferr := d.out.FinishDelivery(ctx, dl.ID, dl.Lease.Token, a, retry); ferr != nil {
		switch {
		case errors.Is(ferr, state.ErrConflict):
			log.Warn("webhook attempt outlived its lease: another process claimed the delivery", "ok", a.OK)
		case errors.Is(ferr, state.ErrNotFound):
		default:
			log.Warn("webhook attempt not recorded; the delivery will be made again", "err", ferr, "ok", a.OK)
		}
		return
	}
	switch {
	case a.OK:
		log.Info("webhook delivered", "url", h.URL, "status", a.Status, "attempt", len(dl.Attempts)+1, "duration", a.Duration)
	case retry.IsZero():
		log.Warn("webhook delivery failed for good", "url", h.URL, "attempts", len(dl.Attempts)+1, "err", err)
	default:
		log.Info("webhook attempt failed; retrying", "url", h.URL, "attempt", len(dl.Attempts)+1, "retry_at", retry, "err", err)
	}
}

// hook returns the hook id, or nil if it is gone.
func (d *Dispatcher) hook(ctx context.Context, id string) (*state.Hook, error) {
	hs, err := d.out.Hooks(ctx)
	if err != nil {
		return nil, err
	}
	for i := range hs {
		if hs[i].ID == id {
			return &hs[i], nil
		}
	}
	return nil, nil
}

// post sends dl to h and returns the answer's status; an error when it is no 2xx.
func (d *Dispatcher) post(ctx context.Context, h state.Hook, dl state.Delivery) (int, error) {
	body, err := d.render(ctx, h, dl)
	if err != nil {
		return 0, fmt.Errorf("render the event: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, d.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.URL, bytes.NewReader(body))
	if err != nil {
		return 0, fmt.Errorf("request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "armor-controld")
	req.Header.Set(api.HeaderHookEvent, dl.Event.Type)
	req.Header.Set(api.HeaderHookDelivery, strconv.FormatUint(dl.ID, 10))
	req.Header.Set(api.HeaderHookID, h.ID)
	req.Header.Set(api.HeaderHookSignature, api.SignHook(h.Secret, body))
	resp, err := d.client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return 0, fmt.Errorf("no answer within %v", d.cfg.Timeout)
		}
		return 0, err
	}
	defer resp.Body.Close()
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		msg := fmt.Sprintf("HTTP %s", resp.Status)
		if s := strings.TrimSpace(string(snippet)); s != "" {
			msg += ": " + s
		}
		return resp.StatusCode, errors.New(msg)
	}
	return resp.StatusCode, nil
}

// backoff is the wait after the n-th failed attempt.
func (d *Dispatcher) backoff(n int) time.Duration {
	w := d.cfg.BackoffMin
	for i := 1; i < n && w < d.cfg.BackoffMax; i++ {
		w *= 2
	}
	w = min(w, d.cfg.BackoffMax)
	return w + rand.N(w/10+1)
}
