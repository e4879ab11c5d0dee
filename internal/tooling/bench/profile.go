package bench

import (
	"os"
	"runtime/pprof"
)

// CPUProfile starts a CPU profile of this process into the file path
// (runtime/pprof); stop ends it and closes the file. The tools that run a
// rank per process give each rank a path of its own.
func CPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}, nil
}
