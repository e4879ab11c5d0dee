package flight_test

import (
	"testing"

	"go.uber.org/goleak"
)

// The recorders' clock and signal goroutines end with the last recorder.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
