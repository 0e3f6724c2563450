package statetest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/armor-apt/armor/controld/state"
)

// testCertFiles: files are replaced by key; a key's prefixes are whole path segments,
// for listing as for deleting.
func testCertFiles(t *testing.T, st state.Store) {
	ctx := context.Background()
	_, err := st.CertFile(ctx, "certificates/a/a.crt")
	mustErr(t, err, state.ErrNotFound)
	files := map[string]string{
		"certificates/a/a.crt": "A1", "certificates/a/a.key": "KA", "certificates/ab/ab.crt": "AB",
		"acme/users/ops/key": "U", "certificates/a": "not a directory: a file beside one", "empty": "",
	}
	for k, v := range files {
		if err := st.PutCertFile(ctx, k, []byte(v), t0); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.PutCertFile(ctx, "certificates/a/a.crt", []byte("A2"), t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	f := must(st.CertFile(ctx, "certificates/a/a.crt"))(t)
	if string(f.Value) != "A2" || !f.Modified.Equal(t0.Add(time.Hour)) || f.Key != "certificates/a/a.crt" {
		t.Fatalf("replaced file: %+v", f)
	}
	if f := must(st.CertFile(ctx, "empty"))(t); len(f.Value) != 0 {
		t.Fatalf("empty file: %+v", f)
	}
	keys := func(prefix string) []string {
		t.Helper()
		var out []string
		for _, i := range must(st.CertFiles(ctx, prefix))(t) {
			out = append(out, fmt.Sprintf("%s:%d", i.Key, i.Size))
		}
		return out
	}
	if got, want := keys("certificates/a"), []string{"certificates/a:34", "certificates/a/a.crt:2", "certificates/a/a.key:2"}; !slices.Equal(got, want) {
		t.Fatalf("files under certificates/a: %q; want %q", got, want)
	}
	if got := keys(""); len(got) != 6 {
		t.Fatalf("every file: %q", got)
	}
	if got := keys("certificates/a/a.crt/x"); len(got) != 0 {
		t.Fatalf("under a file: %q", got)
	}
	if n := must(st.DeleteCertFiles(ctx, "certificates/a"))(t); n != 3 {
		t.Fatalf("deleted %d; want 3 (certificates/a and the two under it)", n)
	}
	if got, want := keys("certificates"), []string{"certificates/ab/ab.crt:2"}; !slices.Equal(got, want) {
		t.Fatalf("left: %q; want %q", got, want)
	}
	if n := must(st.DeleteCertFiles(ctx, "nothing/here"))(t); n != 0 {
		t.Fatalf("deleted %d of nothing", n)
	}
}

// testCertLocks: a lock is one holder's until it expires or is freed; its holder may
// renew it; freeing someone else's lock is ErrConflict.
func testCertLocks(t *testing.T, st state.Store) {
	ctx := context.Background()
	lock := func(holder string, at time.Time) (state.CertLock, bool) {
		t.Helper()
		l, ok, err := st.LockCert(ctx, "issue_cert_a", holder, at, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		return l, ok
	}
	if l, ok := lock("edge-a", t0); !ok || l.Holder != "edge-a" || !l.Until.Equal(t0.Add(10*time.Second)) {
		t.Fatalf("a free lock: %+v %v", l, ok)
	}
	if l, ok := lock("edge-b", t0.Add(5*time.Second)); ok || l.Holder != "edge-a" {
		t.Fatalf("a lock held by edge-a, asked by edge-b: %+v %v", l, ok)
	}
	if l, ok := lock("edge-a", t0.Add(8*time.Second)); !ok || !l.Until.Equal(t0.Add(18*time.Second)) {
		t.Fatalf("renewed by its holder: %+v %v", l, ok)
	}
	if _, ok := lock("edge-b", t0.Add(17*time.Second)); ok {
		t.Fatal("taken before the renewed lease ended")
	}
	// edge-a died: its lease ends, edge-b takes the lock.
	if l, ok := lock("edge-b", t0.Add(18*time.Second)); !ok || l.Holder != "edge-b" {
		t.Fatalf("an expired lock: %+v %v", l, ok)
	}
	mustErr(t, st.UnlockCert(ctx, "issue_cert_a", "edge-a"), state.ErrConflict)
	if err := st.UnlockCert(ctx, "issue_cert_a", "edge-b"); err != nil {
		t.Fatal(err)
	}
	if err := st.UnlockCert(ctx, "issue_cert_a", "edge-b"); err != nil {
		t.Fatalf("freeing a free lock: %v", err)
	}
	if _, ok := lock("edge-c", t0.Add(19*time.Second)); !ok {
		t.Fatal("a freed lock was not taken")
	}
	if _, ok, err := st.LockCert(ctx, "another", "edge-a", t0.Add(19*time.Second), time.Second); err != nil || !ok {
		t.Fatalf("another lock: %v %v", ok, err)
	}

	// Many edges at once: one gets it.
	var wg sync.WaitGroup
	var mu sync.Mutex
	var winners []string
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			holder := fmt.Sprint("racer-", i)
			_, ok, err := st.LockCert(ctx, "race", holder, t0, time.Minute)
			if err != nil {
				t.Error(err)
			}
			if ok {
				mu.Lock()
				winners = append(winners, holder)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(winners) != 1 {
		t.Fatalf("winners of one lock: %q", winners)
	}
}
