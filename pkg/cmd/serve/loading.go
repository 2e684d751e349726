package serve

import (
	"context"
	"net"
	"net/http"
	"sync"
	"time"
)

// While the model loads (minutes for a large checkpoint), the port is
// already open and answers 503: a Kubernetes readiness probe on /health
// sees "not ready" rather than "connection refused", and a liveness probe
// does not kill a pod that is busy loading. One accept loop on the real
// listener hands connections to the loading server, then to the API server.

// switcher accepts on ln and hands each connection to the current queue.
type switcher struct {
	ln  net.Listener
	mu  sync.Mutex
	cur *connQueue
}

// connQueue is the listener one http.Server sees.
type connQueue struct {
	addr    net.Addr
	conns   chan net.Conn
	done    chan struct{}
	once    sync.Once
	onClose func()
}

func newConnQueue(addr net.Addr, onClose func()) *connQueue {
	return &connQueue{addr: addr, conns: make(chan net.Conn), done: make(chan struct{}), onClose: onClose}
}

func (q *connQueue) Accept() (net.Conn, error) {
	select {
	case c := <-q.conns:
		return c, nil
	case <-q.done:
		return nil, net.ErrClosed
	}
}

func (q *connQueue) Close() error {
	q.once.Do(func() {
		close(q.done)
		if q.onClose != nil {
			q.onClose()
		}
	})
	return nil
}

func (q *connQueue) Addr() net.Addr { return q.addr }

func newSwitcher(ln net.Listener, first *connQueue) *switcher {
	s := &switcher{ln: ln, cur: first}
	go s.loop()
	return s
}

func (s *switcher) current() *connQueue {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur
}

// to makes q the receiver of new connections.
func (s *switcher) to(q *connQueue) {
	s.mu.Lock()
	s.cur = q
	s.mu.Unlock()
}

func (s *switcher) loop() {
	for {
		c, err := s.ln.Accept()
		if err != nil {
			s.current().Close()
			return
		}
		for {
			q := s.current()
			select {
			case q.conns <- c:
			case <-q.done:
				if s.current() == q { // closed for good: nobody serves it
					_ = c.Close()
				} else {
					continue // the queue was replaced: hand it to the next one
				}
			}
			break
		}
	}
}

// loadingHandler answers while the engine loads: /health 503 (not ready),
// every API route 503 with Retry-After in OpenAI's error shape.
func loadingHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Retry-After", "5")
		w.WriteHeader(http.StatusServiceUnavailable)
		if r.URL.Path == "/health" {
			_, _ = w.Write([]byte(`{"status":"loading"}` + "\n"))
			return
		}
		_, _ = w.Write([]byte(`{"error":{"message":"the model is loading","type":"service_unavailable","param":null,"code":"model_loading"}}` + "\n"))
	})
}

// serveLoading serves loadingHandler on q until stop is called; stop
// waits for the 503s in flight.
func serveLoading(q *connQueue) (stop func()) {
	hs := &http.Server{Handler: loadingHandler(), ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() { _ = hs.Serve(q); close(done) }()
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(ctx)
		<-done
	}
}
