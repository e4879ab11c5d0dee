package shm_test

import (
	"bytes"
	"testing"

	"github.com/xpu-go/xpu/internal/shm"
)

// PrefetchWrite is a hint: at every byte of a buffer it changes nothing
// (an encoding that stored, or faulted, would show here).
func TestPrefetchWriteChangesNothing(t *testing.T) {
	b := make([]byte, 4096)
	for i := range b {
		b[i] = byte(i*7 + 1)
	}
	want := bytes.Clone(b)
	for i := range b {
		shm.PrefetchWrite(&b[i])
	}
	if !bytes.Equal(b, want) {
		t.Fatal("PrefetchWrite changed the bytes it was given")
	}
}
