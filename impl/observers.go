package impl

import "sync"

// Observers is the set of callbacks a space keeps for NotifyFree
// (memspace.FreeNotifier), or any such registration, guarded by the
// owner's own lock: Add and Notify are called with it held, and the stop
// function Add returns takes it. The zero value is empty and ready.
type Observers[T any] struct {
	byID map[int]func(T)
	next int
}

// Add registers f, with mu held, and returns the function that removes
// it: it takes mu, and a second call does nothing.
func (o *Observers[T]) Add(mu sync.Locker, f func(T)) (stop func()) {
	if o.byID == nil {
		o.byID = map[int]func(T){}
	}
	id := o.next
	o.next++
	o.byID[id] = f
	return func() {
		mu.Lock()
		defer mu.Unlock()
		delete(o.byID, id)
	}
}

// Notify calls every observer with v, with the owner's lock held.
func (o *Observers[T]) Notify(v T) {
	for _, f := range o.byID {
		f(v)
	}
}
