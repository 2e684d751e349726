package server

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ellm-dev/ellm/pkg/cpu"
	"github.com/ellm-dev/ellm/pkg/engine"
)

// metrics live in the server's own registry, so that several servers (tests)
// never collide and /metrics shows only ellm's series.
type metrics struct {
	reg                                   *prometheus.Registry
	requests                              *prometheus.CounterVec
	ttft, tpot                            prometheus.Histogram
	promptTokens, cachedTokens, genTokens prometheus.Counter
	sessionHits, sessionMisses            prometheus.Counter
	sessionReused                         prometheus.Counter
}

func newMetrics(eng Engine) *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	counter := func(name, help string) prometheus.Counter {
		c := prometheus.NewCounter(prometheus.CounterOpts{Namespace: "ellm", Name: name, Help: help})
		m.reg.MustRegister(c)
		return c
	}
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "ellm", Name: "requests_total",
		Help: "HTTP requests by route and status."}, []string{"route", "status"})
	m.ttft = prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "ellm", Name: "time_to_first_token_seconds",
		Help: "Time from admission to the first generated token.", Buckets: prometheus.ExponentialBuckets(0.005, 2, 14)})
	m.tpot = prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "ellm", Name: "time_per_output_token_seconds",
		Help: "Mean time per generated token after the first, per request.", Buckets: prometheus.ExponentialBuckets(0.001, 2, 14)})
	m.reg.MustRegister(m.requests, m.ttft, m.tpot)
	m.promptTokens = counter("prompt_tokens_total", "Prompt tokens of finished requests.")
	m.cachedTokens = counter("cached_prompt_tokens_total", "Prompt tokens reused from the KV cache instead of computed.")
	m.genTokens = counter("generation_tokens_total", "Generated tokens.")
	m.sessionHits = counter("session_hits_total", "Requests whose messages extended their transcript session.")
	m.sessionMisses = counter("session_misses_total", "Requests naming a session that could not be extended (new or changed history).")
	m.sessionReused = counter("session_reused_tokens_total", "Transcript tokens sent as the prompt prefix by transcript sessions.")
	info := eng.Info()
	threads := prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "ellm", Name: "threads",
		Help: "Compute threads of the kernel pool; source says where the number came from, pinned lists their CPUs (\"none\" when unpinned)."},
		[]string{"source", "pinned"})
	threads.WithLabelValues(info.ThreadsWhy, cpu.FormatCPUList(info.PinnedCPUs)).Set(float64(info.Threads))
	m.reg.MustRegister(threads)
	screen := prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "ellm", Name: "logit_screen_rows",
		Help: "The most logits rows a step screens (0: none); choice says how start-up chose the number (\"\" without a screen)."},
		[]string{"choice"})
	screen.WithLabelValues(info.LogitScreen).Set(float64(info.ScreenRows))
	m.reg.MustRegister(screen)
	gauge := func(name, help string, f func(engine.Stats) float64) {
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "ellm", Name: name, Help: help},
			func() float64 { return f(eng.Stats()) }))
	}
	cfunc := func(name, help string, f func(engine.Stats) float64) {
		m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "ellm", Name: name, Help: help},
			func() float64 { return f(eng.Stats()) }))
	}
	gauge("slots_busy", "Slots generating or prefilling.", func(s engine.Stats) float64 { return float64(s.SlotsBusy) })
	gauge("slots", "Slots (batch size).", func(s engine.Stats) float64 { return float64(s.Slots) })
	gauge("kv_positions_used", "KV cache positions holding tokens.", func(s engine.Stats) float64 { return float64(s.KVUsed) })
	gauge("kv_positions_capacity", "KV cache positions in all.", func(s engine.Stats) float64 { return float64(s.KVCapacity) })
	gauge("queue_depth", "Requests waiting for a slot.", func(s engine.Stats) float64 { return float64(s.QueueDepth) })
	gauge("sessions_stored", "Sessions in the session store.", func(s engine.Stats) float64 { return float64(s.SessionsStored) })
	gauge("session_store_bytes", "Bytes of the files in the session store's directory.", func(s engine.Stats) float64 { return float64(s.SessionStoreBytes) })
	gauge("session_store_max_bytes", "The session store's bound (--session-store-max-bytes); 0 = none.", func(s engine.Stats) float64 { return float64(s.SessionStoreMaxBytes) })
	cfunc("session_store_evicted_total", "Stored sessions evicted, least recently used first, to stay within the bound.", func(s engine.Stats) float64 { return float64(s.SessionsDropped) })
	cfunc("sessions_expired_total", "Sessions deleted after --session-ttl idle.", func(s engine.Stats) float64 { return float64(s.SessionsExpired) })
	cfunc("sessions_deleted_total", "Sessions deleted by DELETE /v1/sessions/{id}.", func(s engine.Stats) float64 { return float64(s.SessionsDeleted) })
	cfunc("prefix_store_purged_blocks_total", "Prefix blocks removed from memory because the only sessions that produced them were deleted.", func(s engine.Stats) float64 { return float64(s.PrefixStorePurged) })
	cfunc("prefix_disk_purged_blocks_total", "Prefix block files deleted because the only sessions that produced them were deleted.", func(s engine.Stats) float64 { return float64(s.PrefixDiskPurged) })
	cfunc("logits_screened_rows_total", "Logits rows of greedy and top-k draws screened by the int8 copy of lm_head (--screen-logits).", func(s engine.Stats) float64 { return float64(s.ScreenedRows) })
	cfunc("logits_screened_tokens_total", "Tokens of screened logits rows whose logits were then computed.", func(s engine.Stats) float64 { return float64(s.ScreenedTokens) })
	cfunc("prefix_cache_hits_total", "Requests that reused a cached prefix.", func(s engine.Stats) float64 { return float64(s.PrefixHits) })
	cfunc("prefix_cache_misses_total", "Requests that reused nothing.", func(s engine.Stats) float64 { return float64(s.PrefixMisses) })
	cfunc("prefix_cache_reused_tokens_total", "Prompt tokens reused by the engine's prefix cache.", func(s engine.Stats) float64 { return float64(s.ReusedTokens) })
	cfunc("prefix_cache_copied_tokens_total", "Reused prompt tokens copied from another slot's KV.", func(s engine.Stats) float64 { return float64(s.CopiedTokens) })
	cfunc("prefix_store_hits_total", "Requests that restored KV from the host-memory prefix store.", func(s engine.Stats) float64 { return float64(s.PrefixStoreHits) })
	cfunc("prefix_store_misses_total", "Requests that found nothing longer in the prefix store than in the slots.", func(s engine.Stats) float64 { return float64(s.PrefixStoreMisses) })
	cfunc("prefix_store_restored_tokens_total", "Prompt tokens restored from the prefix store.", func(s engine.Stats) float64 { return float64(s.PrefixStoreRestored) })
	gauge("prefix_store_bytes", "Host memory holding evicted prefixes' KV.", func(s engine.Stats) float64 { return float64(s.PrefixStoreBytes) })
	gauge("prefix_store_capacity_bytes", "The prefix store's bound (--prefix-cache-bytes).", func(s engine.Stats) float64 { return float64(s.PrefixStoreCapacity) })
	gauge("prefix_disk_bytes", "Bytes of the prefix store's block files (--prefix-cache-dir).", func(s engine.Stats) float64 { return float64(s.PrefixDiskBytes) })
	gauge("prefix_disk_capacity_bytes", "The prefix store's disk bound (--prefix-cache-disk-bytes); 0 = none.", func(s engine.Stats) float64 { return float64(s.PrefixDiskCapacity) })
	gauge("prefix_disk_blocks", "Prefix blocks on disk.", func(s engine.Stats) float64 { return float64(s.PrefixDiskBlocks) })
	cfunc("prefix_disk_written_blocks_total", "Prefix blocks written to disk (evicted from memory, or at shutdown).", func(s engine.Stats) float64 { return float64(s.PrefixDiskWritten) })
	cfunc("prefix_disk_read_blocks_total", "Prefix blocks read back from disk on a hit.", func(s engine.Stats) float64 { return float64(s.PrefixDiskRead) })
	cfunc("prefix_disk_evicted_blocks_total", "Prefix blocks deleted to stay within the disk bound.", func(s engine.Stats) float64 { return float64(s.PrefixDiskEvicted) })
	cfunc("prefix_disk_discarded_blocks_total", "Prefix block files found corrupt or of other weights, deleted unused.", func(s engine.Stats) float64 { return float64(s.PrefixDiskDiscarded) })
	return m
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// observe records a finished generation.
func (m *metrics) observe(res engine.Result) {
	m.promptTokens.Add(float64(res.PromptTokens))
	m.cachedTokens.Add(float64(res.CachedTokens))
	m.genTokens.Add(float64(res.CompletionTokens))
	if res.CompletionTokens > 0 {
		m.ttft.Observe(res.TTFT.Seconds())
	}
	if res.CompletionTokens > 1 {
		m.tpot.Observe((res.Total - res.TTFT).Seconds() / float64(res.CompletionTokens-1))
	}
}
