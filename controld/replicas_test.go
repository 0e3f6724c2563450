package controld_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/armor-apt/armor/controld"
	"github.com/armor-apt/armor/controld/api"
	"github.com/armor-apt/armor/controld/client"
	"github.com/armor-apt/armor/controld/state/postgres"
	"github.com/armor-apt/armor/debian/sign"
	"github.com/armor-apt/armor/internal/testkit/pgtest"
	"github.com/armor-apt/armor/store"
)

// replica is one controld process's server, serving over real HTTP on 127.0.0.1 with
// its own connections to the shared database.
type replica struct {
	url   string
	admin *client.Client
}

// replicas is several controld servers on one PostgreSQL database and one object
// store, as in a deployment behind a load balancer.
type replicas struct {
	t      *testing.T
	db     string
	store  *store.Memory
	key    *sign.Key
	secret string
	r      []*replica
}

func startReplicas(t *testing.T, db string, n int) *replicas {
	t.Helper()
	ctx := context.Background()
	secret, err := controld.CreateTokenIn(ctx, db, "", "root", []string{"*"}, api.Actions)
	if err != nil {
		t.Fatal(err)
	}
	rs := &replicas{t: t, db: db, store: store.NewMemory(), key: loadKey(t, "eddsa"), secret: secret}
	for range n {
		rs.r = append(rs.r, rs.start())
	}
	return rs
}

// start runs one more replica until the test ends.
func (rs *replicas) start() *replica {
	t := rs.t
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	st, err := postgres.Open(ctx, rs.db)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := controld.NewServer(controld.Config{}, rs.store, st)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
		st.Close()
	})
	url := "http://" + ln.Addr().String()
	return &replica{url: url, admin: client.New(url, rs.secret, http.DefaultClient)}
}

func (rs *replicas) release(repo, parent, version string) (id, sum string) {
	tr := newTree(rs.t, repo, parent, version, rs.key)
	return tr.m.ID, tr.publish(rs.t, rs.store)
}

// TestReplicasShareState: two controld servers on one database serve the whole API at
// once: what one creates (repositories, tokens, releases) the other sees and honours.
func TestReplicasShareState(t *testing.T) {
	ctx := context.Background()
	rs := startReplicas(t, pgtest.Database(t), 2)
	a, b := rs.r[0], rs.r[1]
	if _, err := a.admin.CreateRepo(ctx, api.CreateRepoRequest{Name: "demo", Hostnames: []string{"apt.demo.test"}, Keys: []string{publicKey(t, rs.key)}}); err != nil {
		t.Fatal(err)
	}
	if r, err := b.admin.Repo(ctx, "demo"); err != nil || len(r.Hostnames) != 1 {
		t.Fatalf("repository made on A, read on B: %+v, %v", r, err)
	}
	_, err := b.admin.CreateRepo(ctx, api.CreateRepoRequest{Name: "other", Hostnames: []string{"apt.demo.test"}})
	wantStatus(t, err, http.StatusConflict) // the hostname A claimed

	tok, err := b.admin.CreateToken(ctx, "ci", []string{"demo"}, []string{"push", "activate"})
	if err != nil {
		t.Fatal(err)
	}
	ci := client.New(a.url, tok.Secret, http.DefaultClient)
	id, sum := rs.release("demo", "", "1.0")
	if _, err := ci.RecordRelease(ctx, "demo", sum, true, ""); err != nil {
		t.Fatalf("push on A with a token made on B: %v", err)
	}
	rels, err := b.admin.Releases(ctx, "demo")
	if err != nil || len(rels) != 1 || rels[0].ID != id {
		t.Fatalf("releases on B after a push on A: %+v, %v", rels, err)
	}
	if _, err := b.admin.RevokeToken(ctx, "ci"); err != nil {
		t.Fatal(err)
	}
	_, err = ci.Releases(ctx, "demo")
	wantStatus(t, err, http.StatusUnauthorized) // revoked on B, refused on A
}

// TestReplicaLongPollWakes: a routes long poll on replica B answers when replica A
// flips (NOTIFY reaches B), long before its wait ends.
func TestReplicaLongPollWakes(t *testing.T) {
	ctx := context.Background()
	rs := startReplicas(t, pgtest.Database(t), 2)
	a, b := rs.r[0], rs.r[1]
	if _, err := a.admin.CreateRepo(ctx, api.CreateRepoRequest{Name: "demo", Hostnames: []string{"apt.demo.test"}, Keys: []string{publicKey(t, rs.key)}}); err != nil {
		t.Fatal(err)
	}
	tok, err := a.admin.CreateToken(ctx, "edge", []string{"*"}, []string{"read"})
	if err != nil {
		t.Fatal(err)
	}
	edge := client.New(b.url, tok.Secret, http.DefaultClient)
	first, err := edge.Routes(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	id, sum := rs.release("demo", "", "1.0")
	if _, err := a.admin.RecordRelease(ctx, "demo", sum, false, ""); err != nil {
		t.Fatal(err)
	}
	for round := range 3 {
		type result struct {
			r   *api.Routes
			err error
		}
		done := make(chan result, 1)
		go func() {
			// A wait far longer than the test allows: only the flip on A can end it.
			r, err := edge.Routes(ctx, first.Version, 120*time.Second)
			done <- result{r, err}
		}()
		time.Sleep(300 * time.Millisecond) // let the poll wait on B
		flipped := time.Now()
		if round == 0 {
			_, err = a.admin.Activate(ctx, "demo", id, "")
		} else {
			_, err = a.admin.SetRetention(ctx, "demo", time.Duration(round)*time.Hour)
		}
		if err != nil {
			t.Fatal(err)
		}
		select {
		case res := <-done:
			if res.err != nil {
				t.Fatalf("long poll on B: %v", res.err)
			}
			if res.r.Version <= first.Version || res.r.Sites[0].Active == nil || res.r.Sites[0].Active.ID != id {
				t.Fatalf("routes on B after the flip on A: %+v", res.r)
			}
			t.Logf("round %d: B answered %v after A changed", round, time.Since(flipped))
			first = res.r
		case <-time.After(30 * time.Second):
			t.Fatalf("round %d: the long poll on B did not answer after a change on A", round)
		}
	}
}

// TestReplicaConcurrentFlips: activations racing through two replicas on the same
// expected release: each round exactly one wins, and every loser hears the winner.
func TestReplicaConcurrentFlips(t *testing.T) {
	ctx := context.Background()
	rs := startReplicas(t, pgtest.Database(t), 2)
	a := rs.r[0]
	if _, err := a.admin.CreateRepo(ctx, api.CreateRepoRequest{Name: "demo", Keys: []string{publicKey(t, rs.key)}}); err != nil {
		t.Fatal(err)
	}
	root, sum := rs.release("demo", "", "0")
	if _, err := a.admin.RecordRelease(ctx, "demo", sum, true, ""); err != nil {
		t.Fatal(err)
	}
	const rounds, racers = 3, 8
	current := root
	for round := range rounds {
		ids := make([]string, racers)
		for i := range ids {
			id, sum := rs.release("demo", current, fmt.Sprintf("%d.%d", round, i)) // each on the active release
			if _, err := a.admin.RecordRelease(ctx, "demo", sum, false, ""); err != nil {
				t.Fatal(err)
			}
			ids[i] = id
		}
		var mu sync.Mutex
		var winners []string
		var losers []*client.APIError
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i, id := range ids {
			via := rs.r[i%len(rs.r)].admin
			wg.Go(func() {
				<-start
				_, err := via.Activate(ctx, "demo", id, current)
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
	hist, err := rs.r[1].admin.History(ctx, "demo")
	if err != nil || len(hist) != rounds+1 || hist[len(hist)-1].To != current {
		t.Errorf("history on B: %d entries, %v; want %d ending at %s", len(hist), err, rounds+1, current)
	}
}

// TestDatabaseLost: with the database down, API calls answer 503 with Retry-After (the
// routes feed too, so edges keep what they serve), and work again once it is back.
func TestDatabaseLost(t *testing.T) {
	ctx := context.Background()
	srv := pgtest.Start(t)
	rs := startReplicas(t, srv.Database(t), 1)
	a := rs.r[0]
	if _, err := a.admin.CreateRepo(ctx, api.CreateRepoRequest{Name: "demo"}); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	for _, path := range []string{"/v1/repos", "/v1/routes"} {
		req, _ := http.NewRequest(http.MethodGet, a.url+path, nil)
		req.Header.Set("Authorization", "Bearer "+rs.secret)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
			t.Errorf("GET %s with the database down: %d, Retry-After %q; want 503 with Retry-After", path, resp.StatusCode, resp.Header.Get("Retry-After"))
		}
	}
	_, err := a.admin.CreateRepo(ctx, api.CreateRepoRequest{Name: "other"})
	if e := wantStatus(t, err, http.StatusServiceUnavailable); !strings.Contains(e.Message, "database") {
		t.Errorf("503 message %q does not say the database is the problem", e.Message)
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		_, err := a.admin.CreateRepo(ctx, api.CreateRepoRequest{Name: "other"})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("create after the database came back: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestRunDatabaseUnreachable: controld does not start on a database it cannot reach,
// and says where it looked.
func TestRunDatabaseUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	cfg := controld.Config{Listen: "127.0.0.1:0", Store: t.TempDir(),
		Database: "postgres://armor@" + addr + "/armor?sslmode=disable&connect_timeout=3"}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = controld.Run(ctx, cfg, nil)
	if err == nil || !strings.Contains(err.Error(), addr+"/armor") || !strings.Contains(err.Error(), "unreachable") {
		t.Fatalf("run = %v, want an error saying %s/armor is unreachable", err, addr)
	}
}

// TestReplicaGCExclusion: the collector's exclusions hold across replicas: while another
// process deletes objects, a recording waits; while it collects, a collection asked here
// is refused as busy.
func TestReplicaGCExclusion(t *testing.T) {
	ctx := context.Background()
	db := pgtest.Database(t)
	rs := startReplicas(t, db, 1)
	a := rs.r[0]
	other, err := postgres.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := a.admin.CreateRepo(ctx, api.CreateRepoRequest{Name: "demo", Keys: []string{publicKey(t, rs.key)}}); err != nil {
		t.Fatal(err)
	}
	_, sum := rs.release("demo", "", "1.0")
	release, err := other.HoldDeletion(ctx)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := a.admin.RecordRelease(ctx, "demo", sum, true, "")
		done <- err
	}()
	select {
	case err := <-done:
		release()
		t.Fatalf("a release was recorded while another replica deleted objects (err %v)", err)
	case <-time.After(time.Second):
	}
	release()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("record after the deletion ended: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the recording did not go on after the deletion ended")
	}

	stop, ok, err := other.TryCollect(ctx)
	if err != nil || !ok {
		t.Fatalf("collect lock: %v, %v", ok, err)
	}
	defer stop()
	_, err = a.admin.GC(ctx, true)
	if e := wantStatus(t, err, http.StatusConflict); e.Code != api.CodeBusy {
		t.Errorf("gc while another replica collects: %s, want %s", e.Code, api.CodeBusy)
	}
}
