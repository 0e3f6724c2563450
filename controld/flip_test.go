package controld_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/armor-apt/armor/controld/client"
)

// TestConcurrentActivations races many activations expecting the same current release:
// each round exactly one wins and every other gets 409 naming the winner.
func TestConcurrentActivations(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.repo("demo")
	root, sum := f.release("demo", "", "0")
	if _, err := f.admin.RecordRelease(ctx, "demo", sum, true, ""); err != nil {
		t.Fatal(err)
	}
	const rounds, racers = 4, 10
	current := root
	for round := range rounds {
		ids := make([]string, racers)
		for i := range ids {
			id, sum := f.release("demo", current, fmt.Sprintf("%d.%d", round, i)) // each on the active release
			if _, err := f.admin.RecordRelease(ctx, "demo", sum, false, ""); err != nil {
				t.Fatal(err)
			}
			ids[i] = id
		}
		var mu sync.Mutex
		var winners []string
		var losers []*client.APIError
		var wg sync.WaitGroup
		start := make(chan struct{})
		for _, id := range ids {
			wg.Go(func() {
				<-start
				_, err := f.admin.Activate(ctx, "demo", id, current)
				mu.Lock()
				defer mu.Unlock()
				var apiErr *client.APIError
				switch {
				case err == nil:
					winners = append(winners, id)
				case errors.As(err, &apiErr) && apiErr.Status == http.StatusConflict:
					losers = append(losers, apiErr)
				default:
					t.Errorf("activate: %v", err)
				}
			})
		}
		close(start)
		wg.Wait()
		if len(winners) != 1 || len(losers) != racers-1 {
			t.Fatalf("round %d: %d winners and %d losers, want 1 and %d", round, len(winners), len(losers), racers-1)
		}
		for _, l := range losers {
			if l.Active != winners[0] {
				t.Errorf("round %d: a loser was told %q is active, want the winner %s", round, l.Active, winners[0])
			}
		}
		current = winners[0]
	}
	hist, err := f.admin.History(ctx, "demo")
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) != rounds+1 || hist[len(hist)-1].To != current {
		t.Errorf("history has %d entries ending at %s, want %d ending at %s", len(hist), hist[len(hist)-1].To, rounds+1, current)
	}
}

func TestRoutesLongPoll(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.repo("demo", "apt.example.test")
	edge := f.token("edge", []string{"*"}, "read")
	first, err := edge.Routes(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Sites) != 1 || first.Sites[0].Active != nil || len(first.Sites[0].Retained) != 0 {
		t.Fatalf("routes before any release = %+v", first)
	}
	// Unchanged: a conditional request without wait is 304 at once, with wait after it.
	if _, err := edge.Routes(ctx, first.Version, 0); !errors.Is(err, client.ErrNotModified) {
		t.Errorf("conditional routes without change: %v, want ErrNotModified", err)
	}
	if _, err := edge.Routes(ctx, first.Version, time.Second); !errors.Is(err, client.ErrNotModified) {
		t.Errorf("long poll without change: %v, want ErrNotModified", err)
	}
	// A stale version answers at once.
	if r, err := edge.Routes(ctx, first.Version-1, 30*time.Second); err != nil || r.Version != first.Version {
		t.Errorf("long poll with a stale version = %+v, %v", r, err)
	}

	id, sum := f.release("demo", "", "1.0")
	if _, err := f.admin.RecordRelease(ctx, "demo", sum, false, ""); err != nil {
		t.Fatal(err)
	}
	type result struct {
		r   any
		err error
		at  time.Time
	}
	done := make(chan result, 1)
	go func() {
		// A wait far longer than the test: only the activation can end it with a 200.
		r, err := edge.Routes(ctx, first.Version, 60*time.Second)
		done <- result{r, err, time.Now()}
	}()
	time.Sleep(200 * time.Millisecond) // let the poll start waiting (it would answer at once otherwise, also fine)
	activated := time.Now()
	if _, err := f.admin.Activate(ctx, "demo", id, ""); err != nil {
		t.Fatal(err)
	}
	select {
	case res := <-done:
		if res.err != nil {
			t.Fatalf("long poll: %v", res.err)
		}
		t.Logf("long poll answered %v after the activation", res.at.Sub(activated))
	case <-time.After(30 * time.Second):
		t.Fatal("the long poll did not answer after an activation")
	}
	after, err := edge.Routes(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if after.Version <= first.Version || after.Sites[0].Active == nil || after.Sites[0].Active.ID != id {
		t.Errorf("routes after activation = %+v", after)
	}
}

func TestRoutesWireFormat(t *testing.T) {
	f := newFixture(t)
	f.repo("demo", "apt.example.test")
	status, body := f.rawRequest("GET", "/v1/routes", f.secret, nil)
	want := `"sites": [
    {
      "repository": "demo",
      "hostnames": [
        "apt.example.test"
      ],
      "active": null,
      "retained": [],
      "keys": [
        "-----BEGIN PGP PUBLIC KEY BLOCK-----`
	if status != 200 || !contains(body, `"version": 2`) || !contains(body, `"generated_at": "2026-11-22T08:00:00Z"`) || !contains(body, want) {
		t.Errorf("routes body (%d):\n%s\nwant it to contain\n%s", status, body, want)
	}
	routes, err := f.admin.Routes(context.Background(), 0, 0)
	if err != nil || len(routes.Sites) != 1 || len(routes.Sites[0].Keys) != 1 || routes.Sites[0].Keys[0] != publicKey(t, f.key) {
		t.Errorf("routes' keys: %+v, %v; want the registered key", routes, err)
	}
	req, _ := http.NewRequest("GET", f.http.URL+"/v1/routes", nil)
	req.Header.Set("Authorization", "Bearer "+f.secret)
	req.Header.Set("If-None-Match", `W/"2"`)
	resp, err := f.http.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotModified || resp.Header.Get("ETag") != `"2"` {
		t.Errorf("conditional request: %d ETag %q, want 304 with ETag \"2\"", resp.StatusCode, resp.Header.Get("ETag"))
	}
}

func TestRetention(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.repo("demo")
	id1, sum1 := f.release("demo", "", "1.0")
	id2, sum2 := f.release("demo", id1, "2.0")
	if _, err := f.admin.RecordRelease(ctx, "demo", sum1, true, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := f.admin.RecordRelease(ctx, "demo", sum2, false, ""); err != nil {
		t.Fatal(err)
	}
	f.clock.Add(time.Hour)
	deactivated := f.clock.Now()
	if _, err := f.admin.Activate(ctx, "demo", id2, id1); err != nil {
		t.Fatal(err)
	}
	if err := f.srv.Expire(ctx); err != nil { // first look: nothing ended
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		advance  time.Duration
		retained bool
	}{
		{"just deactivated", 0, true},
		{"47h later", 47 * time.Hour, true},
		{"49h later", 2 * time.Hour, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f.clock.Add(tc.advance)
			before, err := f.admin.Routes(ctx, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			if err := f.srv.Expire(ctx); err != nil {
				t.Fatal(err)
			}
			routes, err := f.admin.Routes(ctx, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			site := routes.Sites[0]
			if site.Active.ID != id2 {
				t.Errorf("active = %s, want %s", site.Active.ID, id2)
			}
			if got := len(site.Retained) == 1; got != tc.retained {
				t.Fatalf("retained = %+v, want release 1 retained: %v", site.Retained, tc.retained)
			}
			if tc.retained && (site.Retained[0].ID != id1 || site.Retained[0].Manifest != sum1 ||
				!site.Retained[0].Until.Equal(deactivated.Add(48*time.Hour)) || !site.Retained[0].DeactivatedAt.Equal(deactivated)) {
				t.Errorf("retained = %+v, want %s until %v", site.Retained[0], id1, deactivated.Add(48*time.Hour))
			}
			// When a window ends, the version moves so that waiting edges learn of it.
			if ended := !tc.retained; ended != (routes.Version > before.Version) {
				t.Errorf("version %d → %d across the expiry check; window ended: %v", before.Version, routes.Version, ended)
			}
		})
	}
}

func contains(s, sub string) bool { return len(sub) == 0 || indexOf(s, sub) >= 0 }
