package hooks

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/armor-apt/armor/controld/api"
	"github.com/armor-apt/armor/controld/state"
)

// outbox is an in-memory Outbox holding one hook and the deliveries given.
type outbox struct {
	mu       sync.Mutex
	hook     state.Hook
	pending  []state.Delivery
	finished chan finished
}

type finished struct {
	a     state.Attempt
	retry time.Time
}

func (o *outbox) Hooks(context.Context) ([]state.Hook, error) { return []state.Hook{o.hook}, nil }

func (o *outbox) ClaimDeliveries(_ context.Context, c state.Claim) ([]state.Delivery, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := o.pending
	o.pending = nil
	for i := range out {
		out[i].Lease = &state.Lease{By: c.By, Until: c.Now.Add(c.Lease), Token: "t"}
	}
	return out, nil
}

func (o *outbox) FinishDelivery(_ context.Context, id uint64, token string, a state.Attempt, retry time.Time) (state.Delivery, error) {
	o.finished <- finished{a, retry}
	return state.Delivery{ID: id}, nil
}

func (o *outbox) PruneDeliveries(context.Context, time.Time) (int, error) { return 0, nil }

// attemptAt runs a dispatcher until one attempt at a ping to url is recorded.
func attemptAt(t *testing.T, url string, cfg Config, prior int) finished {
	t.Helper()
	o := &outbox{hook: state.Hook{ID: "h", URL: url, Secret: "s"}, finished: make(chan finished, 1)}
	o.pending = []state.Delivery{{ID: 1, Hook: "h", Event: state.Event{Type: state.EventPing, Hook: "h"}, Attempts: make([]state.Attempt, prior)}}
	d := New(cfg, o, func(context.Context, state.Hook, state.Delivery) ([]byte, error) {
		return []byte(`{"event":"ping"}`), nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { d.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	select {
	case f := <-o.finished:
		return f
	case <-time.After(10 * time.Second):
		t.Fatal("no attempt recorded")
		return finished{}
	}
}

// TestAttempt: a 2xx is a delivery, signed as api.SignHook says; a redirect, an error
// status or no answer within the timeout is a failed attempt, retried after the
// backoff, until the last attempt.
func TestAttempt(t *testing.T) {
	var gotSig string
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotSig = r.Header.Get(api.HeaderHookSignature)
		w.WriteHeader(http.StatusAccepted)
	}))
	defer ok.Close()
	redirect := httptest.NewServer(http.RedirectHandler(ok.URL, http.StatusTemporaryRedirect))
	defer redirect.Close()
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	}))
	defer slow.Close()
	cfg := Config{Timeout: 300 * time.Millisecond, BackoffMin: time.Minute, BackoffMax: time.Hour, MaxAttempts: 3}

	f := attemptAt(t, ok.URL, cfg, 0)
	if !f.a.OK || f.a.Status != 202 || !f.retry.IsZero() || gotSig != api.SignHook("s", []byte(`{"event":"ping"}`)) {
		t.Fatalf("delivered: %+v, signature %q", f, gotSig)
	}
	f = attemptAt(t, redirect.URL, cfg, 0)
	if f.a.OK || f.a.Status != 307 || !strings.Contains(f.a.Error, "307") {
		t.Fatalf("a redirect: %+v", f)
	}
	if wait := time.Until(f.retry); wait < 50*time.Second || wait > 67*time.Second {
		t.Fatalf("first retry in %v; want the minute of backoff_min (plus jitter)", wait)
	}
	f = attemptAt(t, slow.URL, cfg, 1)
	if f.a.OK || !strings.Contains(f.a.Error, "no answer within 300ms") {
		t.Fatalf("a receiver too slow: %+v", f)
	}
	if wait := time.Until(f.retry); wait < 110*time.Second || wait > 133*time.Second {
		t.Fatalf("second retry in %v; want two minutes", wait)
	}
	if f = attemptAt(t, slow.URL, cfg, 2); !f.retry.IsZero() {
		t.Fatalf("the last of 3 attempts is retried at %v", f.retry)
	}
}

// TestBackoff: the wait doubles from BackoffMin and stops at BackoffMax.
func TestBackoff(t *testing.T) {
	d := New(Config{BackoffMin: 10 * time.Second, BackoffMax: time.Minute}, nil, nil)
	for n, want := range map[int]time.Duration{1: 10 * time.Second, 2: 20 * time.Second, 3: 40 * time.Second, 4: time.Minute, 30: time.Minute} {
		if got := d.backoff(n); got < want || got > want+want/10 {
			t.Errorf("backoff after %d failures = %v; want %v plus at most a tenth", n, got, want)
		}
	}
}
