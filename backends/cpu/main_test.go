package cpu_test

import (
	"testing"

	"go.uber.org/goleak"
)

// The executor and the streams start goroutines; every test must leave
// none behind.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
