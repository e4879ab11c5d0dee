package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// Without a launcher both ranks run in this process. (xpucmd's tests run
// it under `xpu run -n 2`.)
func TestStandalone(t *testing.T) {
	defer goleak.VerifyNone(t)
	for _, v := range []string{"XPU_RANK", "XPU_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
		"PMI_RANK", "PMI_SIZE", "SLURM_PROCID", "SLURM_NTASKS"} {
		t.Setenv(v, "")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, run(ctx))
}
