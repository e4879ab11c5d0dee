package cpu_test

import (
	"sync"
	"testing"

	"github.com/xpu-go/xpu/internal/tooling/testwait"
)

// concurrently runs work(g) for g in [0, n) on n goroutines and reports each error it returns.
func concurrently(t *testing.T, n int, work func(g int) error) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for g := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := work(g); err != nil {
				errs <- err
			}
		}()
	}
	testwait.Group(t, &wg, "the concurrent work")
	close(errs)

	for err := range errs {
		t.Error(err)
	}
}
