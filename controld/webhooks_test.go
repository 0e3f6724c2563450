package controld_test

import (
	"context"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/armor-apt/armor/controld"
	"github.com/armor-apt/armor/controld/api"
	"github.com/armor-apt/armor/internal/duration"
	"github.com/armor-apt/armor/internal/testkit/hooktest"
)

// hooksConfig delivers quickly: short timeout and backoff, three attempts.
func hooksConfig() controld.Config {
	return controld.Config{Hooks: controld.HooksConfig{
		Timeout: duration.Duration(2 * time.Second), MaxAttempts: 3,
		BackoffMin: duration.Duration(100 * time.Millisecond), BackoffMax: duration.Duration(200 * time.Millisecond),
	}}
}

// serving is a fixture whose server also runs Serve (and with it the webhook
// dispatcher) until the test ends.
func serving(t *testing.T, cfg controld.Config) *fixture {
	t.Helper()
	f := newFixtureWith(t, cfg, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return f
}

// hook registers a hook to rcv and makes rcv trust its secret.
func (f *fixture) hook(rcv *hooktest.Receiver, repos []string, events ...string) api.Hook {
	f.t.Helper()
	out, err := f.admin.CreateHook(context.Background(), api.CreateHookRequest{URL: rcv.URL, Events: events, Repositories: repos})
	if err != nil {
		f.t.Fatalf("create hook: %v", err)
	}
	if !strings.HasPrefix(out.Secret, "armorhook_") || len(out.Secret) < 40 {
		f.t.Fatalf("hook secret %q", out.Secret)
	}
	rcv.Trust(out.Hook.ID, out.Secret)
	return out.Hook
}

// ignoreResult keeps the error of a call whose result the test does not need.
func ignoreResult[T any](_ T, err error) error { return err }

func events(got []hooktest.Received) []string {
	var out []string
	for _, g := range got {
		out = append(out, g.Event+":"+g.Payload.Repository)
	}
	return out
}

// TestHooksDelivered: each event a hook asks for reaches it once, signed with its
// secret, saying what happened: records, activations with the paths they changed,
// rollbacks, key changes and garbage collections. Hooks of other repositories or other
// events hear nothing of it, nor of a downgrade that controld refused.
func TestHooksDelivered(t *testing.T) {
	ctx := context.Background()
	f := serving(t, hooksConfig())
	f.repo("demo", "apt.demo.test")
	f.repo("other", "apt.other.test")
	rcv, quiet := hooktest.Start(t), hooktest.Start(t)
	h := f.hook(rcv, []string{"demo"}, "record", "activate", "rollback", "key")
	all := f.hook(rcv, []string{"*"}, "gc")
	f.hook(quiet, []string{"other"}, "record", "activate", "rollback", "key")
	f.hook(quiet, []string{"demo"}, "activate") // demo's activations, to the other receiver

	id1, sum1 := f.release("demo", "", "1.0")
	id2, sum2 := f.release("demo", id1, "2.0")
	if _, err := f.admin.RecordRelease(ctx, "demo", sum1, true, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := f.admin.RecordRelease(ctx, "demo", sum2, true, id1); err != nil {
		t.Fatal(err)
	}
	// A downgrade dressed as a push is refused, and tells no hook of anything.
	if e := wantStatus(t, ignoreResult(f.admin.RecordRelease(ctx, "demo", sum1, true, id2)), http.StatusConflict); e.Code != api.CodeNotOnActiveLine {
		t.Fatalf("recording the older release with activate: code %q, want %q", e.Code, api.CodeNotOnActiveLine)
	}
	if _, err := f.admin.Rollback(ctx, "demo", id2); err != nil {
		t.Fatal(err)
	}
	if _, err := f.admin.AddKey(ctx, "demo", publicKey(t, f.other)); err != nil {
		t.Fatal(err)
	}
	if _, err := f.admin.RemoveKey(ctx, "demo", f.other.Fingerprint()); err != nil {
		t.Fatal(err)
	}
	f.clock.Add(72 * time.Hour)
	if _, err := f.admin.GC(ctx, false); err != nil {
		t.Fatal(err)
	}
	want := []string{"record:demo", "activate:demo", "record:demo", "activate:demo", "rollback:demo", "key:demo", "key:demo", "gc:"}
	got := rcv.Wait(t, 10*time.Second, "8 events", func(r []hooktest.Received) bool { return len(r) >= len(want) })
	slices.SortFunc(got, func(a, b hooktest.Received) int { return int(a.Payload.EventID) - int(b.Payload.EventID) })
	if e := events(got); !slices.Equal(e, want) {
		t.Fatalf("events %q; want %q", e, want)
	}
	time.Sleep(300 * time.Millisecond)
	if n := len(rcv.Received()); n != len(want) {
		t.Fatalf("%d deliveries; want %d, each event once", n, len(want))
	}
	if q := quiet.Received(); len(q) != 2 || q[0].Event != "activate" || q[1].Event != "activate" {
		t.Fatalf("the hooks of another repository, and of demo's activations only, got %q", events(q))
	}
	if r := rcv.Rejected(); len(r) != 0 {
		t.Fatalf("rejected deliveries: %v", r)
	}

	rec, act2, rb, added, gc := got[0].Payload, got[3].Payload, got[4].Payload, got[5].Payload, got[7].Payload
	if rec.Hook != h.ID || rec.Release == nil || rec.Release.ID != id1 || rec.By != "root" || !slices.Equal(rec.Hostnames, []string{"apt.demo.test"}) {
		t.Errorf("record payload %+v", rec)
	}
	if act2.Activation == nil || act2.Activation.From != id1 || act2.Activation.To != id2 || act2.Release.ID != id2 || act2.RoutesVersion == 0 {
		t.Errorf("activate payload %+v", act2)
	}
	wantPaths := []string{"dists/stable/InRelease", "dists/stable/Release", "dists/stable/Release.gpg",
		"dists/stable/main/binary-amd64/Packages", "pool/main/h/hello/hello_1.0_amd64.deb", "pool/main/h/hello/hello_2.0_amd64.deb"}
	if !slices.Equal(act2.ChangedPaths, wantPaths) || act2.ChangedPathsTruncated {
		t.Errorf("changed paths of the second activation:\n got  %q\n want %q", act2.ChangedPaths, wantPaths)
	}
	if got[1].Payload.Activation.From != "" || len(got[1].Payload.ChangedPaths) != 5 {
		t.Errorf("first activation: every path but by-hash changed: %q", got[1].Payload.ChangedPaths)
	}
	if rb.Activation == nil || !rb.Activation.Rollback || rb.Activation.To != id1 || !slices.Equal(rb.ChangedPaths, wantPaths) {
		t.Errorf("rollback payload %+v", rb)
	}
	if added.Key == nil || added.Key.Action != "added" || added.Key.Fingerprint != f.other.Fingerprint() || got[6].Payload.Key.Action != "removed" {
		t.Errorf("key payloads %+v, %+v", added.Key, got[6].Payload.Key)
	}
	if gc.Hook != all.ID || gc.GC == nil || gc.Repository != "" {
		t.Errorf("gc payload %+v", gc)
	}

	log, err := f.admin.Deliveries(ctx, h.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(log) != 7 {
		t.Fatalf("log of hook %s: %d deliveries; want 7", h.ID, len(log))
	}
	for _, d := range log {
		if d.State != "delivered" || len(d.Attempts) != 1 || !d.Attempts[0].OK || d.Attempts[0].Status != 204 || d.InFlight != nil {
			t.Errorf("delivery %+v", d)
		}
	}
}

// TestHooksRetry: a receiver that fails gets the delivery again, with backoff, until
// it answers 2xx; one that keeps failing gets MaxAttempts tries and the delivery is
// failed, until it is redelivered on request. The log shows every attempt.
func TestHooksRetry(t *testing.T) {
	ctx := context.Background()
	f := serving(t, hooksConfig())
	f.repo("demo")
	rcv := hooktest.Start(t)
	h := f.hook(rcv, []string{"demo"}, "record")

	rcv.FailNext(2)
	_, sum := f.release("demo", "", "1.0")
	if _, err := f.admin.RecordRelease(ctx, "demo", sum, false, ""); err != nil {
		t.Fatal(err)
	}
	rcv.Wait(t, 10*time.Second, "the record after two failures", func(r []hooktest.Received) bool { return len(r) == 1 })
	log, err := f.admin.Deliveries(ctx, h.ID, 1)
	if err != nil {
		t.Fatal(err)
	}
	if d := log[0]; d.State != "delivered" || len(d.Attempts) != 3 || d.Attempts[0].OK || d.Attempts[0].Status != 500 ||
		!strings.Contains(d.Attempts[0].Error, "receiver failing on purpose") || !d.Attempts[2].OK {
		t.Fatalf("log after two failures: %+v", d)
	}
	if gap := log[0].Attempts[1].At.Sub(log[0].Attempts[0].At); gap < 100*time.Millisecond {
		t.Fatalf("retried after %v; want the 100ms backoff", gap)
	}

	rcv.FailNext(100)
	ping, err := f.admin.PingHook(ctx, h.ID)
	if err != nil || ping.ID != h.ID {
		t.Fatalf("ping: %+v, %v", ping, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	var failed api.Delivery
	for failed.State != "failed" {
		if time.Now().After(deadline) {
			t.Fatalf("the ping was not failed after 3 attempts: %+v", failed)
		}
		time.Sleep(50 * time.Millisecond)
		log, err := f.admin.Deliveries(ctx, h.ID, 1)
		if err != nil {
			t.Fatal(err)
		}
		failed = log[0]
	}
	if failed.Event != "ping" || len(failed.Attempts) != 3 {
		t.Fatalf("failed delivery %+v", failed)
	}
	rcv.FailNext(0)
	if _, err := f.admin.Redeliver(ctx, failed.ID); err != nil {
		t.Fatal(err)
	}
	rcv.Wait(t, 10*time.Second, "the redelivered ping", func(r []hooktest.Received) bool { return len(r) == 2 && r[1].Event == "ping" })
	if _, err := f.admin.Redeliver(ctx, 1<<40); err == nil {
		t.Fatal("redelivering an unknown delivery succeeded")
	}
}

// TestHookScopes: hooks are administered like tokens: only with admin on every
// repository a hook covers; requests that make no sense are 400s naming the field.
func TestHookScopes(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	f.repo("a")
	f.repo("b")
	rcv := hooktest.Start(t)
	hb := f.hook(rcv, []string{"b"}, "activate")
	adminA := f.token("admin-a", []string{"a"}, "admin")
	reader := f.token("reader", []string{"*"}, "read", "push", "activate")

	ha, err := adminA.CreateHook(ctx, api.CreateHookRequest{URL: rcv.URL, Events: []string{"activate", "record", "activate"}, Repositories: []string{"a"}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ha.Hook.Events, []string{"activate", "record"}) {
		t.Errorf("events %q; want sorted, once each", ha.Hook.Events)
	}
	tests := []struct {
		name   string
		req    api.CreateHookRequest
		status int
		msg    string
	}{
		{"beyond its repositories", api.CreateHookRequest{URL: rcv.URL, Events: []string{"record"}, Repositories: []string{"b"}}, 403, "beyond its own"},
		{"all repositories", api.CreateHookRequest{URL: rcv.URL, Events: []string{"record"}, Repositories: []string{"*"}}, 403, "beyond its own"},
		{"gc of one repository", api.CreateHookRequest{URL: rcv.URL, Events: []string{"gc"}, Repositories: []string{"a"}}, 400, "gc concerns every repository"},
		{"no events", api.CreateHookRequest{URL: rcv.URL, Repositories: []string{"a"}}, 400, "at least one event"},
		{"unknown event", api.CreateHookRequest{URL: rcv.URL, Events: []string{"push"}, Repositories: []string{"a"}}, 400, `unknown event "push"`},
		{"no repositories", api.CreateHookRequest{URL: rcv.URL, Events: []string{"record"}}, 400, "at least one repository"},
		{"not a URL", api.CreateHookRequest{URL: "ftp://x/", Events: []string{"record"}, Repositories: []string{"a"}}, 400, "http:// or https://"},
		{"relative URL", api.CreateHookRequest{URL: "/hook", Events: []string{"record"}, Repositories: []string{"a"}}, 400, "url"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := adminA.CreateHook(ctx, tt.req)
			if e := wantStatus(t, err, tt.status); !strings.Contains(e.Message, tt.msg) {
				t.Fatalf("message %q; want one with %q", e.Message, tt.msg)
			}
		})
	}
	_, err = reader.CreateHook(ctx, api.CreateHookRequest{URL: rcv.URL, Events: []string{"record"}, Repositories: []string{"a"}})
	wantStatus(t, err, 403)
	_, err = reader.Hooks(ctx)
	wantStatus(t, err, 403)

	list, err := adminA.Hooks(ctx)
	if err != nil || len(list) != 1 || list[0].ID != ha.Hook.ID {
		t.Fatalf("admin of a lists %+v, %v; want its own hook only", list, err)
	}
	_, err = adminA.DeleteHook(ctx, hb.ID)
	wantStatus(t, err, 403)
	_, err = adminA.PingHook(ctx, hb.ID)
	wantStatus(t, err, 403)
	_, err = adminA.Deliveries(ctx, hb.ID, 0)
	wantStatus(t, err, 403)
	_, err = adminA.DeleteHook(ctx, "nosuchhook")
	wantStatus(t, err, 404)
	if _, err := adminA.DeleteHook(ctx, ha.Hook.ID); err != nil {
		t.Fatal(err)
	}
	if list, _ := f.admin.Hooks(ctx); len(list) != 1 || list[0].ID != hb.ID {
		t.Fatalf("after removal: %+v", list)
	}
	status, body := f.rawRequest(http.MethodPost, "/v1/hooks", f.secret, []byte(`{"url":"http://x/","events":["record"],"repositories":["a"],"secret":"mine"}`))
	if status != 400 || !strings.Contains(body, "secret") {
		t.Fatalf("unknown field: %d %s", status, body)
	}
}
