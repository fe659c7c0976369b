package broadcaster

import "sync"

// runBounded calls f(i) for every i in [0, n), at most limit calls at a
// time (at least one), and returns once every call has returned. The
// appends of a step fan out through it: one goroutine per target or per
// node batch, bounded so that a broadcast to many channels cannot open
// an unbounded number of calls at once.
func runBounded(n, limit int, f func(i int)) {
	sem := make(chan struct{}, max(1, limit))
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			f(i)
		}()
	}
	wg.Wait()
}
