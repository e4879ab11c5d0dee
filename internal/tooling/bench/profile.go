package bench

import (
	"io"
	"os"
	"runtime/pprof"
	"runtime/trace"
)

// CPUProfile starts a CPU profile of this process into the file path
// (runtime/pprof); stop ends it and closes the file. The tools that run a
// rank per process give each rank a path of its own.
func CPUProfile(path string) (stop func(), err error) {
	return recordTo(path, pprof.StartCPUProfile, pprof.StopCPUProfile)
}

// Trace starts the runtime's execution tracer into the file path
// (runtime/trace), as CPUProfile starts a profile.
func Trace(path string) (stop func(), err error) {
	return recordTo(path, trace.Start, trace.Stop)
}

// recordTo creates the file path, starts a recording into it with start,
// and returns what ends it with end and closes the file.
func recordTo(path string, start func(io.Writer) error, end func()) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := start(f); err != nil {
		_ = f.Close()
		return nil, err
	}
	return func() {
		end()
		_ = f.Close()
	}, nil
}
