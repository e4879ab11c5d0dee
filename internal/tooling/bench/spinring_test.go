//go:build linux

package bench_test

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/xpu-go/xpu/backends/local"
	"github.com/xpu-go/xpu/internal/tooling/bench"
	"github.com/xpu-go/xpu/internal/tooling/testwait"
)

// envSpinOffer makes the test binary the side 1 of a spin ring whose offer
// it holds (hex), for TestSpinRingBetweenProcesses.
const envSpinOffer = "XPU_TEST_SPIN_OFFER"

// spinRounds is how many round trips the tests run.
const spinRounds = 20000

func TestMain(m *testing.M) {
	if o := os.Getenv(envSpinOffer); o != "" {
		if err := answerSpinRing(o); err != nil {
			fmt.Fprintln(os.Stderr, "side 1:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

// answerSpinRing is side 1 of spinRounds round trips on the ring of the
// offer (hex).
func answerSpinRing(offer string) error {
	b, err := hex.DecodeString(offer)
	if err != nil {
		return err
	}
	o, err := bench.DecodeSpinOffer(b)
	if err != nil {
		return err
	}
	ring, err := bench.AttachSpinRing(o)
	if err != nil {
		return err
	}
	defer ring.Close()
	return answer(ring, spinRounds)
}

// answer runs n round trips on side 1 of ring: each message must be the
// round trip's number (side 0 sends them in order), and PingPong sends it
// back.
func answer(ring *bench.SpinRing, n int) error {
	buf := make([]byte, 8)
	for i := range uint64(n) {
		if err := ring.PingPong(1, buf); err != nil {
			return err
		}
		if got := binary.LittleEndian.Uint64(buf); got != i {
			return fmt.Errorf("round trip %d: got %d", i, got)
		}
	}
	return nil
}

// ping runs n round trips on side 0 of ring: each sends the round trip's
// number and checks that it comes back.
func ping(ring *bench.SpinRing, n int) error {
	buf := make([]byte, 8)
	for i := range uint64(n) {
		binary.LittleEndian.PutUint64(buf, i)
		if err := ring.PingPong(0, buf); err != nil {
			return err
		}
		if got := binary.LittleEndian.Uint64(buf); got != i {
			return fmt.Errorf("round trip %d: the answer is %d", i, got)
		}
	}
	return nil
}

func TestSpinRingInOneProcess(t *testing.T) {
	ring0, offer, err := bench.NewSpinRing()
	require.NoError(t, err)
	defer ring0.Close()
	ring1, err := bench.AttachSpinRing(offer)
	require.NoError(t, err)
	defer ring1.Close()
	ring0.Attached() // the mapping outlives the descriptor
	done := make(chan error, 1)
	go func() { done <- answer(ring1, spinRounds) }()
	require.NoError(t, ping(ring0, spinRounds))
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(time.Minute):
		t.Fatal("side 1 did not finish within a minute")
	}
}

func TestSpinRingBetweenProcesses(t *testing.T) {
	ring, offer, err := bench.NewSpinRing()
	require.NoError(t, err)
	defer ring.Close()
	cmd := exec.Command(os.Args[0], "-test.run", "^$")
	cmd.Env = append(os.Environ(), envSpinOffer+"="+hex.EncodeToString(offer.Encode()))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	pingErr := ping(ring, spinRounds)
	if pingErr != nil {
		_ = cmd.Process.Kill()
	}
	waitErr := cmd.Wait()
	require.NoError(t, pingErr, "side 0")
	require.NoError(t, waitErr, "side 1: %s", stderr.String())
}

// A side whose peer never answers gets ErrSpinStall once the stall limit
// has passed, not a hang.
func TestSpinRingStalls(t *testing.T) {
	ring, _, err := bench.NewSpinRing()
	require.NoError(t, err)
	defer ring.Close()
	ring.SetStall(50 * time.Millisecond)
	start := time.Now()
	err = ring.PingPong(0, make([]byte, 8))
	require.ErrorIs(t, err, bench.ErrSpinStall)
	require.Less(t, time.Since(start), 10*time.Second, "the wait is bounded by the stall limit")
	require.NotContains(t, err.Error(), "\n")
}

func TestSpinRingBadInput(t *testing.T) {
	ring, offer, err := bench.NewSpinRing()
	require.NoError(t, err)
	defer ring.Close()
	require.ErrorContains(t, ring.PingPong(0, make([]byte, 7)), "want side 0 or 1 and 8 bytes")
	require.ErrorContains(t, ring.PingPong(2, make([]byte, 8)), "want side 0 or 1 and 8 bytes")
	require.ErrorContains(t, ring.PingPong(-1, make([]byte, 8)), "want side 0 or 1 and 8 bytes")

	_, err = bench.DecodeSpinOffer(offer.Encode()[:15])
	require.ErrorContains(t, err, "offer of 15 bytes")
	got, err := bench.DecodeSpinOffer(offer.Encode())
	require.NoError(t, err)
	require.Equal(t, offer, got)

	// A descriptor that is not open in the offering process.
	_, err = bench.AttachSpinRing(bench.SpinOffer{PID: os.Getpid(), FD: 1 << 20})
	require.Error(t, err)
	require.False(t, errors.Is(err, bench.ErrSpinStall))
	// A file of another size.
	f, err := os.CreateTemp(t.TempDir(), "spin")
	require.NoError(t, err)
	defer f.Close()
	_, err = bench.AttachSpinRing(bench.SpinOffer{PID: os.Getpid(), FD: int(f.Fd())})
	require.ErrorContains(t, err, "want 4096")
}

// Two ranks share a ring through their communicator and run round trips
// on it; a third rank cannot.
func TestShareSpinRing(t *testing.T) {
	g, err := local.NewGroup(3, local.Options{})
	require.NoError(t, err)
	defer func() {
		for _, c := range g {
			_ = c.Close()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rings := make([]*bench.SpinRing, 2)
	errs := make(chan error, 2)
	for r := range 2 {
		go func() {
			var err error
			rings[r], err = bench.ShareSpinRing(ctx, g[r])
			errs <- err
		}()
	}
	for range 2 {
		require.NoError(t, testwait.Recv(t, errs, "a rank sharing the ring"))
	}
	defer rings[0].Close()
	defer rings[1].Close()
	go func() { errs <- answer(rings[1], 1000) }()
	require.NoError(t, ping(rings[0], 1000))
	require.NoError(t, testwait.Recv(t, errs, "side 1's round trips"))
	_, err = bench.ShareSpinRing(ctx, g[2])
	require.ErrorContains(t, err, "only ranks 0 and 1")
}
