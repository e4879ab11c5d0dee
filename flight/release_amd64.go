//go:build amd64 && !race

package flight

// release stores v in *p as a plain store, which x86 orders after every
// earlier store (a release), without the exchange (a full fence, ~9 ns)
// that atomic.StoreUint64 is on amd64. It is written in assembly so that
// the compiler orders it too: it moves no load or store across a call.
// Readers load *p atomically.
//
//go:noescape
func release(p *uint64, v uint64)
