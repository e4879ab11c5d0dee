package faults

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/xpu-go/xpu/xerr"
)

// ErrInjected marks every error this package injects. An injected error
// also matches the sentinel it imitates (memspace.ErrOutOfMemory,
// comm.ErrPeerLost, …) when the Fault names one.
var ErrInjected = xerr.NewKind("injected fault", nil)

// Kind is the kind of operation a fault is considered for.
type Kind uint8

// The operations wrappers consult their injector on.
const (
	Alloc Kind = iota + 1
	Free
	Isend
	Irecv
)

func (k Kind) String() string {
	switch k {
	case Alloc:
		return "alloc"
	case Free:
		return "free"
	case Isend:
		return "isend"
	case Irecv:
		return "irecv"
	}
	return "unknown"
}

// Op describes an operation about to happen.
type Op struct {
	Kind Kind
	Rank int // the wrapped communicator's rank; -1 for spaces
	Peer int // destination or source rank; -1 for spaces
	Tag  int // message tag; 0 for spaces
	Size int // bytes
}

// Fault is what happens to an operation. The zero Fault lets it through.
type Fault struct {
	// Err fails the operation at once. The wrappers return an error that
	// matches ErrInjected and Err.
	Err error
	// Delay holds the operation back (a send is delivered late, an
	// allocation returns late).
	Delay time.Duration
	// Drop makes a send complete without delivering its message.
	Drop bool
	// LosePeer makes Op.Peer lost for good: this and every later operation
	// involving it fail with comm.ErrPeerLost, and pending ones are
	// released.
	LosePeer bool
	// LoseDevice makes a Space's device lost for good, as a device that
	// failed is: this and every later operation of the Space fail with an
	// error that matches ErrInjected and xerr.ErrDeviceLost (the value
	// memspace and executor re-export). A Comm has no device: it fails the
	// one operation with that error.
	LoseDevice bool
}

// IsZero reports whether f lets the operation through untouched.
func (f Fault) IsZero() bool {
	return f.Err == nil && f.Delay == 0 && !f.Drop && !f.LosePeer && !f.LoseDevice
}

// Injector decides the fault for each operation. It must be safe for
// concurrent use.
type Injector interface {
	Inject(op Op) Fault
}

// InjectorFunc adapts a function to Injector.
type InjectorFunc func(op Op) Fault

// Inject calls f.
func (f InjectorFunc) Inject(op Op) Fault { return f(op) }

// None injects nothing.
var None Injector = InjectorFunc(func(Op) Fault { return Fault{} })

// Always gives every operation f.
func Always(f Fault) Injector { return InjectorFunc(func(Op) Fault { return f }) }

// OnKind applies inj to operations of kind k only.
func OnKind(k Kind, inj Injector) Injector {
	return InjectorFunc(func(op Op) Fault {
		if op.Kind != k {
			return Fault{}
		}
		return inj.Inject(op)
	})
}

// OnPeer applies inj to operations with peer p only.
func OnPeer(p int, inj Injector) Injector {
	return InjectorFunc(func(op Op) Fault {
		if op.Peer != p {
			return Fault{}
		}
		return inj.Inject(op)
	})
}

// Nth gives f to the n-th operation it is asked about (1-based) and lets
// every other one through.
func Nth(n int64, f Fault) Injector {
	var count atomic.Int64
	return InjectorFunc(func(Op) Fault {
		if count.Add(1) == n {
			return f
		}
		return Fault{}
	})
}

// From gives f to the n-th operation and every one after it.
func From(n int64, f Fault) Injector {
	var count atomic.Int64
	return InjectorFunc(func(Op) Fault {
		if count.Add(1) >= n {
			return f
		}
		return Fault{}
	})
}

// Random gives f to each operation with probability p, from a generator
// seeded with seed so runs repeat.
func Random(p float64, seed uint64, f Fault) Injector {
	var mu sync.Mutex
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	return InjectorFunc(func(Op) Fault {
		mu.Lock()
		hit := r.Float64() < p
		mu.Unlock()
		if hit {
			return f
		}
		return Fault{}
	})
}

// Any asks each injector in turn and returns the first non-zero fault.
func Any(injs ...Injector) Injector {
	return InjectorFunc(func(op Op) Fault {
		for _, inj := range injs {
			if f := inj.Inject(op); !f.IsZero() {
				return f
			}
		}
		return Fault{}
	})
}

// Switch turns an injector on and off at run time. The zero Switch is off
// and injects nothing.
type Switch struct {
	on  atomic.Bool
	inj Injector
}

// NewSwitch returns a switch over inj, initially off.
func NewSwitch(inj Injector) *Switch { return &Switch{inj: inj} }

// On turns the switch on.
func (s *Switch) On() { s.on.Store(true) }

// Off turns the switch off.
func (s *Switch) Off() { s.on.Store(false) }

// Inject asks the inner injector when the switch is on.
func (s *Switch) Inject(op Op) Fault {
	if s.inj == nil || !s.on.Load() {
		return Fault{}
	}
	return s.inj.Inject(op)
}

// Name is the backend name of the errors the wrappers make themselves
// (xerr.Error.Backend): "faults isend: injected fault: peer lost".
const Name = "faults"

// inject returns the error a Fault's Err becomes: it names the operation
// and matches both ErrInjected and err.
func inject(op Op, err error) error {
	return xerr.Op(Name, op.Kind.String(), fmt.Errorf("%w: %w", ErrInjected, err))
}
