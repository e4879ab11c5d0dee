package join

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzHello checks the hello decoder the same way, and the check Dial
// makes of a decoded hello: a peer of another world size, or with a rank
// outside it, is refused.
func FuzzHello(f *testing.F) {
	h := hello{purpose: purposePeer, rank: 3, size: 8, terms: Terms{Limit: 1024, Budget: 1 << 20}}
	f.Add(h.encode())
	h = hello{purpose: purposeStore, rank: 7, size: 8, terms: Terms{Limit: 1 << 31, Budget: 1 << 63}}
	f.Add(h.encode())
	f.Add([]byte("XPUT"))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := decodeHello(b)
		if err != nil {
			if !errors.Is(err, ErrAuth) {
				t.Fatalf("error %v does not match ErrAuth", err)
			}
			return
		}
		if !bytes.Equal(got.encode(), b) {
			t.Fatalf("%x decodes to %+v, which encodes differently", b, got)
		}
		if got.purpose != purposePeer && got.purpose != purposeStore {
			t.Fatalf("purpose %d accepted", got.purpose)
		}
		const size = 8
		err = checkHello(size, func(uint8, int) bool { return true })(got)
		if ok := got.size == size && got.rank < size; (err == nil) != ok {
			t.Fatalf("check of %+v in a job of %d: %v", got, size, err)
		}
		if err != nil && !errors.Is(err, ErrAuth) {
			t.Fatalf("error %v does not match ErrAuth", err)
		}
	})
}
