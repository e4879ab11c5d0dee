//go:build amd64 && !race

package order

// Release stores v in *p with release order: a plain store, which x86
// orders after every earlier load and store. Readers load *p atomically.
//
//go:noescape
func Release(p *uint64, v uint64)

// ReleaseWords stores the words of src into dst, as many as the shorter
// holds, in order, each with release order: plain stores. Readers load
// each word atomically. One call writes a record of several words, where
// a Release per word pays a call per word.
//
//go:noescape
func ReleaseWords(dst, src []uint64)
