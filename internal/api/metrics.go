package api

import (
	"github.com/prometheus/client_golang/prometheus"
)

// httpMetrics are the request figures, labelled by route pattern (bounded:
// one per registered route, plus "unmatched") and status code.
type httpMetrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	// rateLimited counts 429 answers by the limit that refused (a
	// ratelimit category, or "other" for the failed-auth lockout and
	// caps without a limiter decision): bounded labels.
	rateLimited *prometheus.CounterVec
}

func newHTTPMetrics(reg prometheus.Registerer) (*httpMetrics, error) {
	m := &httpMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "sandhold", Subsystem: "http", Name: "requests_total",
			Help: "HTTP requests by method, route pattern and status code.",
		}, []string{"method", "route", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "sandhold", Subsystem: "http", Name: "request_duration_seconds",
			Help:    "HTTP request latency by method, route pattern and status code.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"method", "route", "code"}),
		rateLimited: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "sandhold", Subsystem: "ratelimit", Name: "refusals_total",
			Help: "HTTP requests refused with 429, by the limit that refused them.",
		}, []string{"category"}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.latency, m.rateLimited} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}
