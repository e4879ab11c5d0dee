package sim_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Every endpoint runs a goroutine; Context.Close must end them all.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
