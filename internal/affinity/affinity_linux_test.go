package affinity_test

import (
	"os"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/internal/affinity"
)

// A bound thread reads its new set, and its old one once restored; the
// process's set, read by its id, is its main thread's.
func TestBindThread(t *testing.T) {
	all, err := affinity.Of(0)
	require.NoError(t, err)
	require.NotEmpty(t, all)
	proc, err := affinity.Of(os.Getpid())
	require.NoError(t, err)
	assert.Equal(t, all, proc, "no thread of this test process is bound yet")
	last := all[len(all)-1]

	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	restore, err := affinity.BindThread([]int{last})
	require.NoError(t, err)
	bound, err := affinity.Of(0)
	require.NoError(t, err)
	assert.Equal(t, []int{last}, bound)
	require.NoError(t, restore())
	back, err := affinity.Of(0)
	require.NoError(t, err)
	assert.Equal(t, all, back)
}

func TestBadInput(t *testing.T) {
	_, err := affinity.BindThread(nil)
	assert.Error(t, err, "an empty set")
	_, err = affinity.Of(-5)
	assert.Error(t, err, "no such process")
}
