//go:build amd64 && !race

package order

// Release stores v in *p with release order: a plain store, which x86
// orders after every earlier load and store. Readers load *p atomically.
//
//go:noescape
func Release(p *uint64, v uint64)
