package controld_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/armor-apt/armor/controld"
	"github.com/armor-apt/armor/controld/api"
	"github.com/armor-apt/armor/controld/client"
	"github.com/armor-apt/armor/controld/state/bolt"
	"github.com/armor-apt/armor/internal/testkit/pgtest"
	"github.com/armor-apt/armor/store"
)

// childEnv makes the test binary run controld instead of the tests (see TestMain).
const childEnv = "ARMOR_CONTROLD_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(runChild())
	}
	os.Exit(pgtest.Main(m))
}

// runChild is the daemon process of the subprocess tests: controld.Run with the data
// dir and store from the environment, JSON logs on stdout, stopped by SIGTERM.
func runChild() int {
	logger := slog.New(slog.NewJSONHandler(os.Stdout, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	cfg := controld.Config{
		Listen:   "127.0.0.1:0",
		DataDir:  os.Getenv("ARMOR_CONTROLD_TEST_DATA"),
		Database: os.Getenv("ARMOR_CONTROLD_TEST_DATABASE"),
		Store:    os.Getenv("ARMOR_CONTROLD_TEST_STORE"),
	}
	if os.Getenv("ARMOR_CONTROLD_TEST_FAST_HOOKS") != "" {
		cfg.Hooks = hooksConfig().Hooks
	}
	if err := controld.Run(ctx, cfg, logger); err != nil {
		logger.Error("controld failed", "err", err)
		return 1
	}
	return 0
}

// child is a controld running in a subprocess.
type child struct {
	cmd  *exec.Cmd
	url  string
	done chan error
}

// startChild starts controld over the state in dataDir and the store storeDir, with
// env added to its environment (ARMOR_CONTROLD_TEST_DATABASE for PostgreSQL,
// ARMOR_CONTROLD_TEST_FAST_HOOKS for quick webhook retries).
func startChild(t *testing.T, dataDir, storeDir string, env ...string) *child {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=1", "ARMOR_CONTROLD_TEST_DATA="+dataDir, "ARMOR_CONTROLD_TEST_STORE="+storeDir)
	cmd.Env = append(cmd.Env, env...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, done: make(chan error, 1)}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var line struct{ Msg, Addr, Err string }
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "controld listening" {
				addr <- line.Addr
			} else if line.Err != "" {
				t.Logf("controld: %s", sc.Text())
			}
		}
		io.Copy(io.Discard, out)
		c.done <- cmd.Wait()
	}()
	select {
	case a := <-addr:
		c.url = "http://" + a
	case err := <-c.done:
		t.Fatalf("controld exited before listening: %v", err)
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatal("controld did not start listening within 60s")
	}
	t.Cleanup(func() { c.cmd.Process.Kill() })
	return c
}

func (c *child) kill(t *testing.T) {
	t.Helper()
	if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-c.done
}

// crashSetup is a data dir with an admin token, a store on disk with prepared releases,
// and repository demo with its first release active.
type crashSetup struct {
	dataDir, storeDir, secret string
	root                      string   // the first release, active
	ids, sums                 []string // prepared releases, children of root
}

func newCrashSetup(t *testing.T, n int) *crashSetup {
	t.Helper()
	s := &crashSetup{dataDir: t.TempDir(), storeDir: t.TempDir()}
	var err error
	s.secret, err = controld.CreateToken(s.dataDir, "root", []string{"*"}, []string{"admin", "push", "activate"})
	if err != nil {
		t.Fatal(err)
	}
	cas, err := store.OpenRclone(context.Background(), s.storeDir)
	if err != nil {
		t.Fatal(err)
	}
	key := loadKey(t, "eddsa")
	first := newTree(t, "demo", "", "0", key)
	firstSum := first.publish(t, cas)
	s.root = first.m.ID
	for i := range n {
		tr := newTree(t, "demo", s.root, fmt.Sprintf("1.%d", i), key)
		s.sums = append(s.sums, tr.publish(t, cas))
		s.ids = append(s.ids, tr.m.ID)
	}
	c := startChild(t, s.dataDir, s.storeDir)
	cl := client.New(c.url, s.secret, nil)
	ctx := context.Background()
	if _, err := cl.CreateRepo(ctx, api.CreateRepoRequest{Name: "demo", Hostnames: []string{"apt.example.test"},
		Keys: []string{publicKey(t, key)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.RecordRelease(ctx, "demo", firstSum, true, ""); err != nil {
		t.Fatal(err)
	}
	c.kill(t)
	return s
}

// acked is what clients saw succeed: it must survive any crash.
type acked struct {
	mu          sync.Mutex
	recorded    map[string]bool
	activations map[uint64]string // history seq → release
}

func (a *acked) record(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.recorded[id] = true
}

func (a *acked) activation(act *api.Activation) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.activations[act.Seq] = act.To
}

// TestCrashSafety kills controld with SIGKILL at random moments while clients record and
// activate releases, restarts it, and checks that the state is consistent, that every
// acknowledged change survived, and that nothing half-done is visible.
func TestCrashSafety(t *testing.T) {
	const rounds, perRound = 6, 6
	s := newCrashSetup(t, rounds*perRound)
	ack := &acked{recorded: map[string]bool{s.root: true}, activations: map[uint64]string{1: s.root}}
	next, quota := 0, 0 // the next prepared release to record; the end of this round's share
	var nextMu sync.Mutex
	takeNext := func() (int, bool) {
		nextMu.Lock()
		defer nextMu.Unlock()
		if next >= quota {
			return 0, false
		}
		next++
		return next - 1, true
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range rounds {
		nextMu.Lock()
		quota = (round + 1) * perRound
		nextMu.Unlock()
		c := startChild(t, s.dataDir, s.storeDir)
		cl := client.New(c.url, s.secret, &http.Client{Timeout: 10 * time.Second})
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		// Recorders: record prepared releases, half of them activating at once.
		for range 2 {
			wg.Go(func() {
				for ctx.Err() == nil {
					i, ok := takeNext()
					if !ok {
						return
					}
					for attempt := 0; attempt < 5; attempt++ { // a lost CAS records nothing: retry
						expect := ""
						activate := i%2 == 0
						if activate {
							st, err := cl.Status(ctx, "demo")
							if err != nil {
								return
							}
							expect = st.Active.Release
						}
						rec, err := cl.RecordRelease(ctx, "demo", s.sums[i], activate, expect)
						if err == nil {
							ack.record(rec.Release.ID)
							if rec.Activation != nil {
								ack.activation(rec.Activation)
							}
							break
						}
						if !errors.Is(err, client.ErrConflict) {
							return // the server died; the outcome is unknown
						}
					}
				}
			})
		}
		// Activators: flip between recorded releases and roll back.
		for w := range 2 {
			wg.Go(func() {
				for ctx.Err() == nil {
					st, err := cl.Status(ctx, "demo")
					if err != nil {
						return
					}
					var act *api.Activation
					if w == 1 && st.Previous != "" {
						act, err = cl.Rollback(ctx, "demo", st.Active.Release)
					} else {
						rels, err2 := cl.Releases(ctx, "demo")
						if err2 != nil {
							return
						}
						act, err = cl.Activate(ctx, "demo", rels[len(rels)/2].ID, st.Active.Release)
					}
					if err == nil {
						ack.activation(act)
					} else if !errors.Is(err, client.ErrConflict) {
						return
					}
				}
			})
		}
		time.Sleep(time.Duration(20+rng.IntN(300)) * time.Millisecond)
		c.kill(t)
		cancel()
		wg.Wait()
		checkCrashState(t, s, ack, round)
	}
	t.Logf("%d rounds: %d releases offered, %d acknowledged recordings, %d acknowledged activations",
		rounds, next, len(ack.recorded), len(ack.activations))
	if len(ack.activations) < rounds || len(ack.recorded) < rounds {
		t.Errorf("only %d recordings and %d activations were acknowledged in %d rounds: the test exercised too little",
			len(ack.recorded), len(ack.activations), rounds)
	}

	// A last restart: the API agrees with the history, and SIGTERM stops it cleanly.
	c := startChild(t, s.dataDir, s.storeDir)
	cl := client.New(c.url, s.secret, nil)
	st, err := cl.Status(context.Background(), "demo")
	if err != nil {
		t.Fatal(err)
	}
	hist, err := cl.History(context.Background(), "demo")
	if err != nil {
		t.Fatal(err)
	}
	if st.Active == nil || st.Active.Release != hist[len(hist)-1].To {
		t.Errorf("after restart the active release is %+v, the history ends at %s", st.Active, hist[len(hist)-1].To)
	}
	c.cmd.Process.Signal(syscall.SIGTERM)
	if err := <-c.done; err != nil {
		t.Errorf("controld exit after SIGTERM: %v", err)
	}
}

// checkCrashState opens the database of the killed controld and checks it.
func checkCrashState(t *testing.T, s *crashSetup, ack *acked, round int) {
	t.Helper()
	ctx := context.Background()
	st, err := bolt.Open(filepath.Join(s.dataDir, controld.DBFile), nil)
	if err != nil {
		t.Fatalf("round %d: reopen after SIGKILL: %v", round, err)
	}
	defer st.Close()
	if err := st.Check(ctx); err != nil {
		t.Fatalf("round %d: state inconsistent after SIGKILL: %v", round, err)
	}
	rels, err := st.Releases(ctx, "demo")
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]string{s.root: ""}
	for i, id := range s.ids {
		known[id] = s.sums[i]
	}
	have := map[string]bool{}
	for _, rel := range rels {
		if _, ok := known[rel.ID]; !ok || rel.Signer == "" || rel.PushedBy != "root" || rel.PushedAt.IsZero() {
			t.Errorf("round %d: half-recorded or unknown release %+v", round, rel)
		}
		have[rel.ID] = true
	}
	hist, err := st.History(ctx, "demo")
	if err != nil {
		t.Fatal(err)
	}
	ack.mu.Lock()
	defer ack.mu.Unlock()
	for id := range ack.recorded {
		if !have[id] {
			t.Errorf("round %d: acknowledged release %s is lost", round, id)
		}
	}
	for seq, to := range ack.activations {
		if seq > uint64(len(hist)) || hist[seq-1].To != to {
			t.Errorf("round %d: acknowledged activation %d → %s is lost", round, seq, to)
		}
	}
}

// TestGracefulShutdown sends SIGTERM while an edge long-polls: the poll ends at once
// and controld exits with status 0.
func TestGracefulShutdown(t *testing.T) {
	dataDir, storeDir := t.TempDir(), t.TempDir()
	secret, err := controld.CreateToken(dataDir, "edge", []string{"*"}, []string{"read"})
	if err != nil {
		t.Fatal(err)
	}
	c := startChild(t, dataDir, storeDir)
	cl := client.New(c.url, secret, nil)
	ctx := context.Background()
	r, err := cl.Routes(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	polled := make(chan error, 1)
	go func() {
		_, err := cl.Routes(ctx, r.Version, time.Minute)
		polled <- err
	}()
	time.Sleep(200 * time.Millisecond)
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-polled:
		if !errors.Is(err, client.ErrNotModified) {
			t.Errorf("long poll during shutdown: %v, want 304", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the long poll did not end on SIGTERM")
	}
	select {
	case err := <-c.done:
		if err != nil {
			t.Errorf("controld exit after SIGTERM: %v, want status 0", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("controld did not exit after SIGTERM")
	}
	// The database is closed and free again.
	st, err := bolt.Open(filepath.Join(dataDir, controld.DBFile), nil)
	if err != nil {
		t.Fatalf("reopen after shutdown: %v", err)
	}
	st.Close()
}
