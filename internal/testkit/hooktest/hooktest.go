// Package hooktest is a real HTTP receiver of controld's webhooks for tests, on
// 127.0.0.1: it checks every delivery's signature against the hook's secret (as a
// receiver must, with api.VerifyHook over the raw body), records what it got, and can
// be told to fail or to hang on the next deliveries.
package hooktest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/armor-apt/armor/controld/api"
)

// Received is one delivery the receiver accepted (2xx).
type Received struct {
	Delivery string // X-Armor-Delivery
	Hook     string // X-Armor-Hook
	Event    string // X-Armor-Event
	Payload  api.HookPayload
	Body     []byte
	At       time.Time
}

// Receiver is a running webhook receiver.
type Receiver struct {
	URL string

	mu       sync.Mutex
	secrets  map[string]string // hook id → secret
	got      []Received
	rejected []string // why deliveries were refused (a bad signature, a bad body)
	attempts int
	fail     int           // answer 500 to this many more deliveries
	hang     chan struct{} // the next delivery waits until it is closed
	hung     chan struct{} // closed when a delivery started hanging
	hungID   string        // that delivery's X-Armor-Delivery
}

// Start runs a receiver until the test ends.
func Start(t testing.TB) *Receiver {
	t.Helper()
	r := &Receiver{secrets: map[string]string{}}
	srv := httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(func() {
		r.mu.Lock()
		if r.hang != nil {
			close(r.hang)
			r.hang = nil
		}
		r.mu.Unlock()
		srv.CloseClientConnections()
		srv.Close()
	})
	r.URL = srv.URL + "/armor-hook"
	return r
}

// Trust makes the receiver accept deliveries of hook id signed with secret.
func (r *Receiver) Trust(id, secret string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.secrets[id] = secret
}

// FailNext answers the next n deliveries 500.
func (r *Receiver) FailNext(n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fail = n
}

// HangNext makes the receiver take the next delivery it accepts (it is counted as
// received) and then wait before answering, until release is called or its sender goes
// away: the sender never learns that it was received. hung is closed once it waits.
func (r *Receiver) HangNext() (hung <-chan struct{}, release func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.hang, r.hung = make(chan struct{}), make(chan struct{})
	h := r.hang
	var once sync.Once
	return r.hung, func() { once.Do(func() { close(h) }) }
}

func (r *Receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	r.mu.Lock()
	r.attempts++
	r.mu.Unlock()
	if err != nil {
		r.reject(w, http.StatusBadRequest, fmt.Sprintf("read body: %v", err))
		return
	}
	id := req.Header.Get(api.HeaderHookID)
	r.mu.Lock()
	secret, known := r.secrets[id]
	failing := r.fail > 0
	if failing {
		r.fail--
	}
	r.mu.Unlock()
	switch {
	case req.Method != http.MethodPost || req.Header.Get("Content-Type") != "application/json":
		r.reject(w, http.StatusMethodNotAllowed, fmt.Sprintf("%s with Content-Type %q", req.Method, req.Header.Get("Content-Type")))
		return
	case !known:
		r.reject(w, http.StatusUnauthorized, fmt.Sprintf("delivery for unknown hook %q", id))
		return
	}
	if err := api.VerifyHook(secret, body, req.Header.Get(api.HeaderHookSignature)); err != nil {
		r.reject(w, http.StatusUnauthorized, fmt.Sprintf("delivery %s: %v", req.Header.Get(api.HeaderHookDelivery), err))
		return
	}
	var p api.HookPayload
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		r.reject(w, http.StatusBadRequest, fmt.Sprintf("delivery %s: body: %v", req.Header.Get(api.HeaderHookDelivery), err))
		return
	}
	if p.Event != req.Header.Get(api.HeaderHookEvent) || p.Hook != id {
		r.reject(w, http.StatusBadRequest, fmt.Sprintf("delivery %s: headers say %s to %s, the body %s to %s",
			req.Header.Get(api.HeaderHookDelivery), req.Header.Get(api.HeaderHookEvent), id, p.Event, p.Hook))
		return
	}
	if failing {
		http.Error(w, "receiver failing on purpose", http.StatusInternalServerError)
		return
	}
	r.mu.Lock()
	r.got = append(r.got, Received{Delivery: req.Header.Get(api.HeaderHookDelivery), Hook: id, Event: p.Event,
		Payload: p, Body: body, At: time.Now()})
	hang, hung := r.hang, r.hung
	r.hang, r.hung = nil, nil
	if hang != nil {
		r.hungID = req.Header.Get(api.HeaderHookDelivery)
	}
	r.mu.Unlock()
	if hang != nil {
		close(hung)
		select {
		case <-hang:
		case <-req.Context().Done(): // the sender died or gave up
			return
		}
	}
	w.WriteHeader(http.StatusNoContent)
}

func (r *Receiver) reject(w http.ResponseWriter, status int, why string) {
	r.mu.Lock()
	r.rejected = append(r.rejected, why)
	r.mu.Unlock()
	http.Error(w, why, status)
}

// Hung returns the id of the delivery HangNext caught ("" before one was).
func (r *Receiver) Hung() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.hungID
}

// Received returns the deliveries accepted so far, in arrival order.
func (r *Receiver) Received() []Received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Received(nil), r.got...)
}

// Rejected returns why deliveries were refused (none, when every signature held).
func (r *Receiver) Rejected() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.rejected...)
}

// Attempts counts every request the receiver saw, accepted or not.
func (r *Receiver) Attempts() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.attempts
}

// Wait waits up to timeout until ok holds for the deliveries received, and fails the
// test with them otherwise.
func (r *Receiver) Wait(t testing.TB, timeout time.Duration, what string, ok func([]Received) bool) []Received {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		got := r.Received()
		if ok(got) {
			return got
		}
		if time.Now().After(deadline) {
			var lines []string
			for _, g := range got {
				lines = append(lines, fmt.Sprintf("delivery %s: %s event %d of %s", g.Delivery, g.Event, g.Payload.EventID, g.Payload.Repository))
			}
			t.Fatalf("webhooks: %s not seen within %v; received %d:\n%v\nrejected: %v", what, timeout, len(got), lines, r.Rejected())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
