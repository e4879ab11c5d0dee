// Package faults wraps memory spaces and communicators with fault
// injection — failed allocations, failed or delayed calls, dropped
// messages, lost peers, lost devices — in the style of pebble's errorfs: a
// wrapper takes an Injector, a one-method interface with a func adapter,
// and injectors compose (Any, Nth, From, Random, OnKind, OnPeer, Switch).
//
//	inj := faults.OnPeer(2, faults.Nth(10, faults.Fault{LosePeer: true}))
//	c := faults.WrapComm(inner, inj)
//
//	s := faults.WrapSpace(inner, faults.Nth(3, faults.Fault{LoseDevice: true}))
//
// Injected errors match ErrInjected and the sentinel the Fault carries
// (say memspace.ErrOutOfMemory, or xerr.ErrDeviceLost for a lost device),
// so code under test sees the errors a real failure would give. They are
// *xerr.Error values of the backend Name, on one line:
// "faults alloc: injected fault: out of memory". Wrappers expose Unwrap, so capabilities are still
// found through them — except native collectives, which the comm wrapper
// declines so that faults reach the messages of the shared algorithms.
package faults
