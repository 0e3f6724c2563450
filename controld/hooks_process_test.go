package controld_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/armor-apt/armor/controld"
	"github.com/armor-apt/armor/controld/api"
	"github.com/armor-apt/armor/controld/client"
	"github.com/armor-apt/armor/internal/testkit/hooktest"
	"github.com/armor-apt/armor/internal/testkit/pgtest"
	"github.com/armor-apt/armor/store"
)

// hookedFleet is controld processes (children) over one state and one store on disk,
// with a repository demo, prepared releases and a hook of its records and activations
// to a receiver checking signatures.
type hookedFleet struct {
	t            *testing.T
	data, store  string
	env          []string
	secret       string
	procs        []*child
	rcv          *hooktest.Receiver
	hook         string
	sums         []string // prepared releases, each the child of the one before
	ids          []string
	next         int // the next prepared release to push
	activeParent string
}

func newHookedFleet(t *testing.T, replicas, releases int, database string) *hookedFleet {
	t.Helper()
	ctx := context.Background()
	f := &hookedFleet{t: t, data: t.TempDir(), store: t.TempDir(), env: []string{"ARMOR_CONTROLD_TEST_FAST_HOOKS=1"}}
	if database != "" {
		f.env = append(f.env, "ARMOR_CONTROLD_TEST_DATABASE="+database)
	}
	var err error
	f.secret, err = controld.CreateTokenIn(ctx, database, f.data, "root", []string{"*"}, api.Actions)
	if err != nil {
		t.Fatal(err)
	}
	cas, err := store.OpenRclone(ctx, f.store)
	if err != nil {
		t.Fatal(err)
	}
	key := loadKey(t, "eddsa")
	parent := ""
	for i := range releases {
		tr := newTree(t, "demo", parent, fmt.Sprintf("1.%d", i), key)
		f.sums = append(f.sums, tr.publish(t, cas))
		f.ids = append(f.ids, tr.m.ID)
		parent = tr.m.ID
	}
	for range replicas {
		f.procs = append(f.procs, startChild(t, f.data, f.store, f.env...))
	}
	cl := f.client(0)
	if _, err := cl.CreateRepo(ctx, api.CreateRepoRequest{Name: "demo", Hostnames: []string{"apt.demo.test"}, Keys: []string{publicKey(t, key)}}); err != nil {
		t.Fatal(err)
	}
	f.rcv = hooktest.Start(t)
	h, err := cl.CreateHook(ctx, api.CreateHookRequest{URL: f.rcv.URL, Events: []string{"record", "activate"}, Repositories: []string{"demo"}})
	if err != nil {
		t.Fatal(err)
	}
	f.rcv.Trust(h.Hook.ID, h.Secret)
	f.hook = h.Hook.ID
	return f
}

func (f *hookedFleet) client(i int) *client.Client { return client.New(f.procs[i].url, f.secret, nil) }

// push records and activates the next prepared release through process i.
func (f *hookedFleet) push(i int, activate bool) {
	f.t.Helper()
	n := f.next
	f.next++
	expect := ""
	if activate {
		expect = f.activeParent
	}
	if _, err := f.client(i).RecordRelease(context.Background(), "demo", f.sums[n], activate, expect); err != nil {
		f.t.Fatalf("push release %d through process %d: %v", n, i, err)
	}
	if activate {
		f.activeParent = f.ids[n]
	}
}

// delivered waits until n distinct deliveries were accepted (and, with again, the one
// the receiver hung on a second time), and returns how many times each was accepted.
func (f *hookedFleet) delivered(n int, timeout time.Duration, again ...bool) map[string]int {
	f.t.Helper()
	seen := map[string]int{}
	f.rcv.Wait(f.t, timeout, fmt.Sprintf("%d deliveries", n), func(got []hooktest.Received) bool {
		clear(seen)
		for _, g := range got {
			seen[g.Delivery]++
		}
		return len(seen) >= n && (len(again) == 0 || seen[f.rcv.Hung()] >= 2)
	})
	return seen
}

// TestHooksKilledMidDelivery: a controld killed (SIGKILL) after its receiver took a
// delivery but before the answer reached it leaves the delivery's lease to expire, and
// the delivery is made again: by the same controld restarted (bbolt, one node), or by
// the other replica (PostgreSQL). Receivers see it twice, under the same delivery id:
// at least once. Without a kill, every event is delivered once, not once per replica:
// each further copy a receiver took must be one the log shows an attempt of that
// timed out (a machine under load), else two processes made it.
func TestHooksKilledMidDelivery(t *testing.T) {
	t.Run("bbolt", func(t *testing.T) {
		f := newHookedFleet(t, 1, 3, "")
		f.push(0, true)
		f.delivered(2, 15*time.Second)
		f.checkOnce(0, 0)
		hung, release := f.rcv.HangNext()
		f.push(0, false)
		waitClosed(t, hung, "the record's delivery to reach the receiver")
		killed := f.procs[0]
		killed.kill(t)
		release()
		f.procs[0] = startChild(t, f.data, f.store, f.env...)
		f.delivered(3, 30*time.Second, true)
		f.checkRedelivered(fmt.Sprint(killed.cmd.Process.Pid), 0)
		f.checkOnce(0, 2)
	})
	t.Run("postgres", func(t *testing.T) {
		f := newHookedFleet(t, 2, 8, pgtest.Database(t))
		for i := range 4 {
			f.push(i%2, true)
		}
		time.Sleep(2 * time.Second) // both dispatchers had their chance at each delivery
		f.delivered(8, 15*time.Second)
		f.checkOnce(0, 0)

		hung, release := f.rcv.HangNext()
		f.push(0, true) // a record and an activation: one of them hangs
		waitClosed(t, hung, "a delivery to reach the receiver")
		holder := f.inFlight()
		victim := slices.IndexFunc(f.procs, func(c *child) bool { return strings.HasSuffix(holder, "/"+strconv.Itoa(c.cmd.Process.Pid)) })
		if victim < 0 {
			t.Fatalf("the delivery in flight is held by %q, no replica of this test", holder)
		}
		f.procs[victim].kill(t)
		release()
		f.delivered(10, 30*time.Second, true)
		f.checkRedelivered(holder[strings.LastIndex(holder, "/")+1:], 1-victim)

		f.procs[victim] = startChild(t, f.data, f.store, f.env...)
		f.push(victim, true)
		time.Sleep(2 * time.Second)
		// The killed replica may have had the push's other delivery in flight too: it
		// may have been taken twice. Every other was taken once.
		f.delivered(12, 15*time.Second)
		f.checkOnce(1-victim, 8)
	})
}

func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(15 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// inFlight returns the process holding the lease of the delivery the receiver hangs on.
func (f *hookedFleet) inFlight() string {
	f.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		for i := range f.procs {
			log, err := f.client(i).Deliveries(context.Background(), f.hook, 5)
			if err != nil {
				continue
			}
			for _, d := range log {
				if d.InFlight != nil && strconv.FormatUint(d.ID, 10) == f.rcv.Hung() {
					return d.InFlight.By
				}
			}
		}
		if time.Now().After(deadline) {
			f.t.Fatal("no delivery in flight")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// checkRedelivered: the delivery the receiver hung on, whose answer the killed process
// never read, was taken twice, and once the survivor has recorded its attempt (the
// receiver counts a delivery before it answers), the log shows it delivered by the
// survivor, not by the killed pid.
func (f *hookedFleet) checkRedelivered(killedPid string, survivor int) {
	f.t.Helper()
	hung := f.rcv.Hung()
	d := f.settled(survivor, hung)
	last := d.Attempts[len(d.Attempts)-1]
	if d.State != "delivered" || !last.OK || strings.HasSuffix(last.By, "/"+killedPid) {
		f.t.Fatalf("the redelivered delivery's log: %+v", d)
	}
	if n := f.taken()[hung]; n != 2 {
		f.fail(f.taken(), fmt.Sprintf("want delivery %s, whose answer the killed process never read, taken twice (%d)", hung, n))
	}
}

// checkOnce: every delivery of the log (read through process i) was made, and taken by
// the receiver once, but for copies the log explains: an attempt that timed out (the
// receiver may have taken it, its answer came late), the hung delivery of a kill, and
// a delivery newer than killedAfter (> 0 after a kill), which the killed process may
// have had in flight. A copy nothing explains was made by two processes.
func (f *hookedFleet) checkOnce(i int, killedAfter int) {
	f.t.Helper()
	log, err := f.client(i).Deliveries(context.Background(), f.hook, 100)
	if err != nil {
		f.t.Fatal(err)
	}
	for j, d := range log {
		log[j] = f.settled(i, strconv.FormatUint(d.ID, 10))
	}
	seen := f.taken() // complete: the log has each attempt once its answer came
	if len(log) != len(seen) {
		f.fail(seen, fmt.Sprintf("the log has %d deliveries, the receiver took %d", len(log), len(seen)))
	}
	for _, d := range log {
		id := strconv.FormatUint(d.ID, 10)
		allowed := 1
		for _, a := range d.Attempts {
			if !a.OK && strings.HasPrefix(a.Error, "no answer within") {
				allowed++
			}
		}
		if id == f.rcv.Hung() || killedAfter > 0 && int(d.ID) > killedAfter {
			allowed++
		}
		if ok := slices.IndexFunc(d.Attempts, func(a api.DeliveryAttempt) bool { return a.OK }); ok < 0 || ok != len(d.Attempts)-1 {
			f.fail(seen, fmt.Sprintf("delivery %s: want one successful attempt, the last; the log: %+v", id, d))
		}
		if seen[id] < 1 || seen[id] > allowed {
			f.fail(seen, fmt.Sprintf("delivery %s taken %d times; the log explains at most %d: %+v", id, seen[id], allowed, d))
		}
	}
}

// settled waits until delivery id is no longer pending in the log read through process
// i, and returns it.
func (f *hookedFleet) settled(i int, id string) api.Delivery {
	f.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		log, err := f.client(i).Deliveries(context.Background(), f.hook, 100)
		if err != nil {
			f.t.Fatal(err)
		}
		j := slices.IndexFunc(log, func(d api.Delivery) bool { return strconv.FormatUint(d.ID, 10) == id })
		if j < 0 {
			f.t.Fatalf("delivery %s not in the log", id)
		}
		if d := log[j]; d.State != "pending" {
			return d
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("delivery %s still pending after 15s: %+v", id, log[j])
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// taken counts the times the receiver took each delivery.
func (f *hookedFleet) taken() map[string]int {
	seen := map[string]int{}
	for _, g := range f.rcv.Received() {
		seen[g.Delivery]++
	}
	return seen
}

func (f *hookedFleet) fail(seen map[string]int, why string) {
	f.t.Helper()
	f.t.Fatalf("deliveries accepted (id: times) %v: %s; rejected: %v", seen, why, f.rcv.Rejected())
}
