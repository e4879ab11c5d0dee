package rdmavm

import (
	"context"
	"os"
	"testing"
	"time"
)

func TestZZScratch(t *testing.T) {
	if os.Getenv("SCRIPT") == "" {
		t.Skip()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := Run(ctx, Job{Script: os.Getenv("SCRIPT"), Output: os.Stdout, MemoryMiB: 1024})
	t.Logf("res %+v\nerr %v", res, err)
}
