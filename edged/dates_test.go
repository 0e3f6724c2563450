package edged

import (
	"bytes"
	"net/http"
	"os"
	"os/exec"
	"path"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/armor-apt/armor/controld/api"
)

// flipSite is the feed entry of repo with active activated at when, and the releases
// in retained (latest deactivated first) deactivated one after the other before it.
func flipSite(repo string, hosts []string, active *rel, when time.Time, retained ...*rel) api.Site {
	s := api.Site{Repository: repo, Hostnames: hosts,
		Active: &api.RouteActive{ID: active.m.ID, Manifest: active.sum, ActivatedAt: when.UTC()}}
	off := when
	for _, r := range retained {
		s.Retained = append(s.Retained, api.Retained{ID: r.m.ID, Manifest: r.sum,
			Until: off.Add(48 * time.Hour).UTC(), DeactivatedAt: off.UTC()})
		off = off.Add(-time.Minute)
	}
	return s
}

func lastModified(t *testing.T, e *testEdge, p string) time.Time {
	t.Helper()
	resp, body := get(t, e.addr, "HEAD", hostA, p)
	wantStatus(t, "HEAD "+p, resp, body, 200)
	lm, err := http.ParseTime(resp.Header.Get("Last-Modified"))
	if err != nil {
		t.Fatalf("%s: Last-Modified %q: %v", p, resp.Header.Get("Last-Modified"), err)
	}
	return lm.UTC()
}

// TestStableDates: a path's Last-Modified is when its content first appeared, across
// flips and restarts; changed content gets the new activation; and a flip the edge did
// not see (a release in between whose content differed) never lets an old date stand.
func TestStableDates(t *testing.T) {
	cas := newTestStore()
	ctl := newFakeControld(t)
	tree1 := aptTree("demo", 1)
	tree2 := aptTree("demo", 1)
	tree2["dists/stable/Release"] = []byte("Archive: stable\nChanged: yes\n")
	tree2["pool/main/n/new/new_1_amd64.deb"] = []byte("new package")
	r1 := makeRelease(t, cas, "demo", "2026-11-20T10:00:00Z", tree1)
	r2 := makeRelease(t, cas, "demo", "2026-11-21T10:00:00Z", tree2)
	t1 := time.Now().Add(-time.Hour).Truncate(time.Second).UTC()
	t2 := t1.Add(30 * time.Minute)
	cfg := testConfig(t, ctl)
	e := startEdge(t, cfg, cas)
	e.waitVersion(t, ctl.set(flipSite("demo", []string{hostA}, r1, t1)))
	if got := lastModified(t, e, "/dists/stable/InRelease"); !got.Equal(t1) {
		t.Fatalf("first release: Last-Modified %v; want its activation %v", got, t1)
	}

	e.waitVersion(t, ctl.set(flipSite("demo", []string{hostA}, r2, t2, r1)))
	for p, want := range map[string]time.Time{
		"/dists/stable/InRelease":                  t1, // unchanged
		"/dists/stable/main/binary-amd64/Packages": t1,
		"/pool/main/h/hello/hello_1_amd64.deb":     t1,
		"/dists/stable/Release":                    t2, // changed
		"/pool/main/n/new/new_1_amd64.deb":         t2, // new
	} {
		if got := lastModified(t, e, p); !got.Equal(want) {
			t.Errorf("after a flip, %s: Last-Modified %v; want %v", p, got, want)
		}
	}
	// An unchanged file answers If-Modified-Since of its first date with 304.
	resp, body := get(t, e.addr, "GET", hostA, "/dists/stable/InRelease", "If-Modified-Since", t1.Format(http.TimeFormat))
	wantStatus(t, "unchanged InRelease, If-Modified-Since its first date", resp, body, 304)

	// Restarted while controld is down: the dates kept on disk are served.
	e.stop()
	ctl.stop()
	e2 := startEdge(t, cfg, cas)
	if got := lastModified(t, e2, "/dists/stable/InRelease"); !got.Equal(t1) {
		t.Errorf("after a restart, InRelease: Last-Modified %v; want %v", got, t1)
	}
	if got := lastModified(t, e2, "/dists/stable/Release"); !got.Equal(t2) {
		t.Errorf("after a restart, Release: Last-Modified %v; want %v", got, t2)
	}
}

// TestDatesAcrossMissedFlip: the edge saw release 1 (InRelease A); releases 2 (B) and
// 3 (A again) were activated while it did not look. A client that got B from another
// edge (dated at release 2's activation at the earliest) must not get a 304 for A.
func TestDatesAcrossMissedFlip(t *testing.T) {
	cas := newTestStore()
	ctl := newFakeControld(t)
	treeA, treeB := aptTree("demo", 1), aptTree("demo", 1)
	treeB["dists/stable/InRelease"] = []byte("other content")
	treeA3 := aptTree("demo", 1)
	treeA3["pool/main/x/x/x_1_amd64.deb"] = []byte("x") // release 3: InRelease as in 1
	r1 := makeRelease(t, cas, "demo", "2026-11-20T10:00:00Z", treeA)
	r2 := makeRelease(t, cas, "demo", "2026-11-20T11:00:00Z", treeB)
	r3 := makeRelease(t, cas, "demo", "2026-11-20T12:00:00Z", treeA3)
	t1 := time.Now().Add(-time.Hour).Truncate(time.Second).UTC()
	t2, t3 := t1.Add(10*time.Minute), t1.Add(20*time.Minute)
	e := startEdge(t, testConfig(t, ctl), cas)
	e.waitVersion(t, ctl.set(flipSite("demo", []string{hostA}, r1, t1)))
	if got := lastModified(t, e, "/dists/stable/InRelease"); !got.Equal(t1) {
		t.Fatalf("release 1: Last-Modified %v; want %v", got, t1)
	}
	// Release 2 was deactivated at t3, when release 3 was activated.
	s := flipSite("demo", []string{hostA}, r3, t3, r2, r1)
	s.Retained[1].DeactivatedAt = t2
	e.waitVersion(t, ctl.set(s))
	if got := lastModified(t, e, "/dists/stable/InRelease"); got.Before(t3) {
		t.Fatalf("InRelease, back to release 1's content after release 2 had other: Last-Modified %v; want no earlier than %v", got, t3)
	}
	resp, body := get(t, e.addr, "GET", hostA, "/dists/stable/InRelease", "If-Modified-Since", t2.Format(http.TimeFormat))
	wantStatus(t, "If-Modified-Since of release 2's activation", resp, body, 200)
	if !bytes.Equal(body, treeA["dists/stable/InRelease"]) {
		t.Fatalf("body %q", body)
	}
	// Paths that stayed the same in every release keep their first date.
	if got := lastModified(t, e, "/dists/stable/main/binary-amd64/Packages"); !got.Equal(t1) {
		t.Errorf("Packages, the same in every release: Last-Modified %v; want %v", got, t1)
	}
}

// TestWgetTimestamps: after a one-package change, the real wget -N (as -m implies)
// downloads again exactly the files whose content changed.
func TestWgetTimestamps(t *testing.T) {
	need(t, "wget")
	cas := newTestStore()
	ctl := newFakeControld(t)
	tree1, tree2 := aptRepo(t), aptRepo(t, "natpmp-utils")
	r1 := makeRelease(t, cas, "demo", "2026-11-20T10:00:00Z", tree1)
	r2 := makeRelease(t, cas, "demo", "2026-11-21T10:00:00Z", tree2)
	t1 := time.Now().Add(-time.Hour).Truncate(time.Second).UTC()
	e := startEdge(t, testConfig(t, ctl), cas)
	e.waitVersion(t, ctl.set(flipSiteHost("127.0.0.1", r1, t1)))

	dir := t.TempDir()
	wgetMirror(t, e.addr, dir)
	e.waitVersion(t, ctl.set(flipSiteHost("127.0.0.1", r2, t1.Add(30*time.Minute), r1)))
	got, out := wgetMirrorOut(t, e.addr, dir, "-nv")
	var fetched []string
	for _, line := range strings.Split(out, "\n") {
		if i := strings.Index(line, ` -> "`); i >= 0 && !strings.Contains(line, "index.html") {
			fetched = append(fetched, strings.Trim(strings.TrimPrefix(strings.Fields(line[i+4:])[0], `"`+dir+"/"), `"`))
		}
	}
	var changed []string
	for p, b := range tree2 {
		if !bytes.Equal(tree1[p], b) {
			changed = append(changed, p)
		}
	}
	if len(changed) == 0 || len(changed) == len(tree2) {
		t.Fatalf("the two releases differ in %d of %d files", len(changed), len(tree2))
	}
	if len(fetched) != len(changed) {
		t.Fatalf("second wget fetched %d files %v; want the %d changed %v\n%s", len(fetched), fetched, len(changed), changed, out)
	}
	for p, want := range tree2 {
		if !bytes.Equal(got[p], want) {
			t.Errorf("mirror's %s differs from release 2's", p)
		}
	}
	t.Logf("second wget -N fetched %d of %d files: %v", len(fetched), len(tree2), fetched)
}

func flipSiteHost(host string, active *rel, when time.Time, retained ...*rel) api.Site {
	return flipSite("demo", []string{host}, active, when, retained...)
}

// TestWgetListingTimestamps: a mirror made by plain wget -N -m (which keeps the
// listings it crawls) fetches again, after a one-package change, the changed files, the
// listings of the directories above them and the page, and nothing else: the other
// listings and the keyrings carry a Last-Modified that stays. An If-Modified-Since later
// than the edge's clock is ignored.
func TestWgetListingTimestamps(t *testing.T) {
	need(t, "wget")
	cas := newTestStore()
	ctl := newFakeControld(t)
	tree1, tree2 := aptRepo(t), aptRepo(t, "natpmp-utils")
	r1 := makeRelease(t, cas, "demo", "2026-11-20T10:00:00Z", tree1)
	r2 := makeRelease(t, cas, "demo", "2026-11-21T10:00:00Z", tree2)
	armored, err := os.ReadFile("../testdata/keys/rsa.pub.asc")
	if err != nil {
		t.Fatal(err)
	}
	// Dates have one-second resolution, and a path is dated only once its activation's
	// second has settled: the activations are a real clock's, a few seconds apart.
	settle := func() time.Time {
		time.Sleep((settleSeconds + 1) * time.Second)
		return time.Now().Truncate(time.Second).UTC()
	}
	e := startEdge(t, testConfig(t, ctl), cas)
	s1 := flipSiteHost("127.0.0.1", r1, settle())
	s1.Keys = []string{string(armored)}
	e.waitVersion(t, ctl.set(s1))
	settle()

	dir := t.TempDir()
	mirror := func() []string {
		cmd := exec.Command("wget", "-m", "-np", "-nH", "-nv", "-e", "robots=off", "--no-proxy", "-P", dir, "http://"+e.addr+"/")
		cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("wget -m: %v\n%s", err, out)
		}
		var fetched []string
		for _, line := range strings.Split(string(out), "\n") {
			if i := strings.Index(line, ` -> "`); i >= 0 {
				fetched = append(fetched, strings.Trim(strings.TrimPrefix(strings.Fields(line[i+4:])[0], `"`+dir+"/"), `"`))
			}
		}
		slices.Sort(fetched)
		return fetched
	}
	first := mirror()
	s2 := flipSiteHost("127.0.0.1", r2, settle(), r1)
	s2.Keys = s1.Keys
	e.waitVersion(t, ctl.set(s2))
	settle()
	got := mirror()

	want := []string{"index.html"} // the page: it names the active release
	listed := map[string]bool{}
	for p, b := range tree2 {
		if bytes.Equal(tree1[p], b) {
			continue
		}
		want = append(want, p)
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			if !listed[d] {
				listed[d] = true
				want = append(want, d+"/index.html")
			}
		}
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("after a one-package change wget -N -m fetched %d files (of %d the first time):\n%q\nwant the %d changed ones and the listings above them:\n%q", len(got), len(first), got, len(want), want)
	}
	t.Logf("wget -N -m fetched %d files the first time, %d after a one-package change", len(first), len(got))

	future := time.Now().Add(24 * time.Hour).UTC().Format(http.TimeFormat)
	for _, p := range []string{"/dists/stable/Release", "/dists/", "/demo-archive-keyring.gpg"} {
		resp, body := get(t, e.addr, "GET", "127.0.0.1", p, "If-Modified-Since", future)
		wantStatus(t, "If-Modified-Since a day ahead, "+p, resp, body, 200)
		resp, body = get(t, e.addr, "GET", "127.0.0.1", p, "If-Modified-Since", resp.Header.Get("Last-Modified"))
		wantStatus(t, "If-Modified-Since its Last-Modified, "+p, resp, body, 304)
	}
}
