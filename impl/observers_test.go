package impl_test

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/xpu-go/xpu/impl"
)

func TestObservers(t *testing.T) {
	var mu sync.Mutex
	var o impl.Observers[int]
	var a, b []int
	mu.Lock()
	o.Notify(1) // none yet
	stopA := o.Add(&mu, func(v int) { a = append(a, v) })
	o.Add(&mu, func(v int) { b = append(b, v) })
	o.Notify(2)
	mu.Unlock()
	stopA()
	stopA() // a second stop does nothing
	mu.Lock()
	o.Notify(3)
	mu.Unlock()
	assert.Equal(t, []int{2}, a, "the stopped observer saw only what came before its stop")
	assert.Equal(t, []int{2, 3}, b)
}
