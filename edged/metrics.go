package edged

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// metrics are the edge's Prometheus series, on a registry of its own so several edges
// can live in one process (tests).
type metrics struct {
	reg          *prometheus.Registry
	requests     *prometheus.CounterVec
	byStatus     [3][len(knownStatuses)]prometheus.Counter // [method][status index]
	hits         prometheus.Counter
	misses       prometheus.Counter
	bytes        prometheus.Counter
	fetchSeconds prometheus.Histogram
	storeErrors  prometheus.Counter
	pollErrors   prometheus.Counter
	version      prometheus.Gauge
	active       *prometheus.GaugeVec
	handshakes   *prometheus.CounterVec // failed TLS handshakes, by reason
	certs        *prometheus.CounterVec // certificate orders by ACME, by result
}

var (
	methodNames   = [3]string{"GET", "HEAD", "other"}
	knownStatuses = [...]int{200, 206, 301, 304, 400, 404, 405, 408, 416, 431, 500, 502, 503}
)

func newMetrics() *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "armor_edge_requests_total", Help: "Requests answered, by method and status code.",
	}, []string{"method", "status"})
	m.hits = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "armor_edge_cache_hits_total", Help: "Object requests served from the memory cache.",
	})
	m.misses = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "armor_edge_cache_misses_total", Help: "Object requests that missed the memory cache (cacheable objects only).",
	})
	m.bytes = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "armor_edge_bytes_served_total", Help: "Response body bytes sent.",
	})
	m.fetchSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "armor_edge_store_fetch_seconds",
		Help:    "Latency of object fetches from the store (whole objects; time to open for streamed ones).",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 15),
	})
	m.storeErrors = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "armor_edge_store_errors_total", Help: "Store fetches that failed or returned a damaged object.",
	})
	m.pollErrors = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "armor_edge_routes_poll_errors_total", Help: "Failed polls or applications of controld's routes feed.",
	})
	m.version = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "armor_edge_routes_version", Help: "Version of the routes feed being served.",
	})
	m.active = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "armor_edge_active_release", Help: "1 for each site's active release being served.",
	}, []string{"site", "repository", "release"})
	m.handshakes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "armor_edge_tls_handshake_failures_total",
		Help: "TLS handshakes that failed: reason \"unrouted\" for a hostname (SNI) the edge does not route, \"other\" for the rest.",
	}, []string{"reason"})
	m.certs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "armor_edge_acme_certificates_total", Help: "Certificates asked of the ACME CA, by result (obtained, failed).",
	}, []string{"result"})
	m.reg.MustRegister(m.requests, m.hits, m.misses, m.bytes, m.fetchSeconds, m.storeErrors,
		m.pollErrors, m.version, m.active, m.handshakes, m.certs,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for mi, method := range methodNames {
		for si, status := range knownStatuses {
			m.byStatus[mi][si] = m.requests.WithLabelValues(method, strconv.Itoa(status))
		}
	}
	return m
}

// request counts one answered request without allocating for the usual statuses.
func (m *metrics) request(method []byte, status int) {
	mi := 2
	switch string(method) {
	case "GET":
		mi = 0
	case "HEAD":
		mi = 1
	}
	for si, s := range knownStatuses {
		if s == status {
			m.byStatus[mi][si].Inc()
			return
		}
	}
	m.requests.WithLabelValues(methodNames[mi], strconv.Itoa(status)).Inc()
}

// setRoutes publishes the version and each site's active release.
func (m *metrics) setRoutes(t *table) {
	m.version.Set(float64(t.version))
	m.active.Reset()
	for _, s := range t.sites {
		m.active.WithLabelValues(s.name, s.repository, s.active.ID).Set(1)
	}
}
