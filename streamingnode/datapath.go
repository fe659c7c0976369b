package streamingnode

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"

	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/objectstore"
	"github.com/coordd/coordd/streamingnode/flusher"
)

// dataPath is the node's part of the write path: a coordd client for
// segment allocation and the flusher (docs/semantics.md#flusher).
type dataPath struct {
	once  sync.Once
	cl    *client.Client
	err   error
	store objectstore.Store
	mgr   *flusher.Manager
}

// dataClient returns the node's client for coordd's DataCoord service. It
// carries the same TLS configuration and credential as the session's
// connections (Config.CoordTLS, Config.CoordToken): on a secure cluster
// every coordd port is TLS and the data-path calls need the node role.
func (n *Node) dataClient() (*client.Client, error) {
	n.dp.once.Do(func() {
		n.dp.cl, n.dp.err = client.New(context.Background(), n.cfg.dataClientConfig())
		if n.dp.err != nil {
			n.dp.err = fmt.Errorf("streamingnode: coordd client: %w", n.dp.err)
		}
	})
	return n.dp.cl, n.dp.err
}

// dataClientConfig is the configuration of the data path's coordd client.
func (c *Config) dataClientConfig() client.Config {
	return client.Config{Endpoints: c.Coord, RequestTimeout: c.RPCTimeout, TLS: c.CoordTLS, Token: c.CoordToken}
}

// objectStoreURL is the configured object store, by default a directory
// named objects beside the shared WAL directory.
func (c *Config) objectStoreURL() (string, error) {
	if c.ObjectStore != "" {
		return c.ObjectStore, nil
	}
	return objectstore.DefaultDirURL(filepath.Join(filepath.Dir(filepath.Clean(c.WALDir)), "objects"))
}

// startFlusher opens the object store and runs the flusher until ctx ends.
func (n *Node) startFlusher(ctx context.Context) error {
	if n.cfg.DisableFlusher {
		return nil
	}
	url, err := n.cfg.objectStoreURL()
	if err != nil {
		return err
	}
	store, err := objectstore.Open(ctx, url)
	if err != nil {
		return err
	}
	cl, err := n.dataClient()
	if err != nil {
		store.Close()
		return err
	}
	n.dp.store = store
	n.dp.mgr = flusher.New(flusher.Config{Host: flusherHost{n}, Coord: cl, Store: store, Logger: n.log,
		TickInterval: n.cfg.FlusherTickInterval, SaveInterval: n.cfg.FlusherSaveInterval, SaveBytes: n.cfg.FlusherSaveBytes})
	n.log.Info("flusher starting", "object_store", url)
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		n.dp.mgr.Run(ctx)
	}()
	return nil
}

// closeDataPath releases the client and the store (after the flusher
// stopped).
func (n *Node) closeDataPath() {
	if n.dp.cl != nil {
		n.dp.cl.Close()
	}
	if n.dp.store != nil {
		n.dp.store.Close()
	}
}

// flusherHost gives the flusher what it needs from the node.
type flusherHost struct{ n *Node }

func (h flusherHost) Session() (uint64, uint64) { return h.n.Session() }
func (h flusherHost) WALDir() string            { return h.n.cfg.WALDir }

func (h flusherHost) Held() map[string]int64 {
	h.n.mu.Lock()
	slots := make(map[string]*slot, len(h.n.slots))
	for p, s := range h.n.slots {
		slots[p] = s
	}
	h.n.mu.Unlock()
	out := map[string]int64{}
	for p, s := range slots {
		s.mu.Lock()
		if s.w != nil && s.mode != "RO" {
			out[p] = s.term
		}
		s.mu.Unlock()
	}
	return out
}

func (h flusherHost) heldSlot(p string, term int64) (*slot, error) {
	s := h.n.slotFor(p, false)
	if s == nil {
		return nil, fmt.Errorf("pchannel %s is not held here", p)
	}
	s.mu.Lock()
	if s.w == nil || s.term != term {
		s.mu.Unlock()
		return nil, fmt.Errorf("pchannel %s is not held here at term %d", p, term)
	}
	return s, nil
}

func (h flusherHost) WALEnd(p string, term int64) (uint64, error) {
	s, err := h.heldSlot(p, term)
	if err != nil {
		return 0, err
	}
	defer s.mu.Unlock()
	return s.w.NextOffset(), nil
}

func (h flusherHost) Tick(ctx context.Context, p string, term int64) (uint64, uint64, error) {
	// The timestamp is taken before the lock (so a slow TSO does not hold
	// up appends): appends take theirs from the same source while holding
	// the lock, so every append not yet in the log when the lock is taken
	// gets a later timestamp, and every record below the offset read under
	// the lock is what the flusher must have consumed.
	h.n.tso.Discard()
	ts, err := h.n.tso.Next(ctx)
	if err != nil {
		return 0, 0, err
	}
	s, err := h.heldSlot(p, term)
	if err != nil {
		return 0, 0, err
	}
	defer s.mu.Unlock()
	return s.w.NextOffset(), ts, nil
}
