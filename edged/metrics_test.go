package edged

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// scrape returns the admin listener's /metrics.
func scrape(t *testing.T, admin string) string {
	t.Helper()
	resp, body := get(t, admin, "GET", "localhost", "/metrics")
	wantStatus(t, "/metrics", resp, body, 200)
	return string(body)
}

func TestMetricsAndHealth(t *testing.T) {
	f := newFixture(t)
	in := f.a.object("dists/stable/InRelease")
	get(t, f.edge.addr, "GET", hostA, "/dists/stable/InRelease")
	get(t, f.edge.addr, "GET", hostA, "/pool/main/h/hello/hello_1_amd64.deb")
	get(t, f.edge.addr, "HEAD", hostA, "/dists/stable/InRelease")
	get(t, f.edge.addr, "GET", hostA, "/nope")
	m := scrape(t, f.edge.admin)
	deb := len(f.a.object("pool/main/h/hello/hello_1_amd64.deb"))
	want := []string{
		`armor_edge_requests_total{method="GET",status="200"} 2`,
		`armor_edge_requests_total{method="HEAD",status="200"} 1`,
		`armor_edge_requests_total{method="GET",status="404"} 1`,
		`armor_edge_cache_hits_total 1`,
		`armor_edge_cache_misses_total 1`,
		fmt.Sprintf(`armor_edge_bytes_served_total %d`, len(in)+deb),
		`armor_edge_store_fetch_seconds_count `,
		`armor_edge_store_fetch_seconds_bucket{le="0.001"}`,
		fmt.Sprintf(`armor_edge_active_release{release="%s",repository="demo",site="%s"} 1`, f.a.m.ID, hostA),
		fmt.Sprintf(`armor_edge_active_release{release="%s",repository="other",site="%s"} 1`, f.b.m.ID, hostB),
		fmt.Sprintf(`armor_edge_routes_version %d`, f.edge.Version()),
	}
	for _, w := range want {
		if !strings.Contains(m, w) {
			t.Errorf("/metrics lacks %q", w)
		}
	}
	if n := len(regexp.MustCompile(`(?m)^armor_edge_active_release\{`).FindAllString(m, -1)); n != 2 {
		t.Errorf("%d active_release series; want 2", n)
	}
	// A flip replaces the site's series.
	r2 := makeRelease(t, f.store, "demo", "2026-11-21T10:00:00Z", aptTree("demo", 2))
	f.edge.waitVersion(t, f.ctl.set(feedSite("demo", []string{hostA}, r2, f.a), feedSite("other", []string{hostB}, f.b)))
	m = scrape(t, f.edge.admin)
	if !strings.Contains(m, `release="`+r2.m.ID+`"`) || strings.Contains(m, `release="`+f.a.m.ID+`"`) {
		t.Error("active_release series not replaced after the flip")
	}

	resp, body := get(t, f.edge.admin, "GET", "localhost", "/healthz")
	wantStatus(t, "/healthz", resp, body, 200)
	if !strings.Contains(string(body), `"status":"ok"`) {
		t.Errorf("/healthz: %s", body)
	}
}
