package streamingnode

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metricsServer serves the node's Prometheus metrics (Config.MetricsAddr):
// Go and process collectors, the PChannels held, and the flusher's
// metrics (streamingnode/flusher).
type metricsServer struct {
	lis net.Listener
	srv *http.Server
}

// startMetrics listens on MetricsAddr (nothing when it is empty).
func (n *Node) startMetrics() error {
	if n.cfg.MetricsAddr == "" {
		return nil
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "coordd_streamingnode_pchannels_held",
		Help: "PChannels whose WAL this node holds (RW or RO)."}, func() float64 {
		n.mu.Lock()
		slots := make([]*slot, 0, len(n.slots))
		for _, s := range n.slots {
			slots = append(slots, s)
		}
		n.mu.Unlock()
		held := 0
		for _, s := range slots {
			s.mu.Lock()
			if s.w != nil {
				held++
			}
			s.mu.Unlock()
		}
		return float64(held)
	}))
	if n.dp.mgr != nil {
		for _, c := range n.dp.mgr.Collectors() {
			if err := reg.Register(c); err != nil {
				return fmt.Errorf("register flusher metrics: %w", err)
			}
		}
	}
	lis, err := net.Listen("tcp", n.cfg.MetricsAddr)
	if err != nil {
		return fmt.Errorf("metrics listen: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	n.metrics = &metricsServer{lis: lis, srv: &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		if err := n.metrics.srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			n.log.Error("metrics server stopped", "error", err)
		}
	}()
	n.log.Info("metrics served", "url", "http://"+lis.Addr().String()+"/metrics")
	return nil
}

// MetricsAddr is the address the metrics are served on ("" when off).
func (n *Node) MetricsAddr() string {
	if n.metrics == nil {
		return ""
	}
	return n.metrics.lis.Addr().String()
}

func (n *Node) stopMetrics() {
	if n.metrics == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := n.metrics.srv.Shutdown(ctx); err != nil {
		n.metrics.srv.Close()
	}
}
