// Package testmain runs tests written against *testing.T from an ordinary
// program, so that `xpu conformance` can run the exported conformance
// suites without `go test`. It supplies testing.MainStart with the small
// set of hooks it needs; profiling, coverage and fuzzing are not offered.
//
// testing.MainStart is not covered by the Go 1 compatibility promise: when a
// Go release changes its hooks, this package stops compiling (it does not
// misbehave), and is mended here alone.
package testmain

import (
	"errors"
	"flag"
	"io"
	"reflect"
	"regexp"
	"sync"
	"testing"
	"time"
)

// corpusEntry mirrors the alias of the same name in package testing.
type corpusEntry = struct {
	Parent     string
	Path       string
	Data       []byte
	Values     []any
	Generation int
	IsSeed     bool
}

var errNoSupport = errors.New("testmain: not supported outside go test")

type deps struct {
	mu    sync.Mutex
	cache map[string]*regexp.Regexp
}

func (*deps) ImportPath() string { return "" }
func (*deps) ModulePath() string { return "" }
func (d *deps) MatchString(pat, str string) (bool, error) {
	d.mu.Lock()
	re, ok := d.cache[pat]
	if !ok {
		var err error
		if re, err = regexp.Compile(pat); err != nil {
			d.mu.Unlock()
			return false, err
		}
		d.cache[pat] = re
	}
	d.mu.Unlock()
	return re.MatchString(str), nil
}
func (*deps) SetPanicOnExit0(bool)                        {}
func (*deps) StartCPUProfile(io.Writer) error             { return errNoSupport }
func (*deps) StopCPUProfile()                             {}
func (*deps) StartTestLog(io.Writer)                      {}
func (*deps) StopTestLog() error                          { return nil }
func (*deps) WriteProfileTo(string, io.Writer, int) error { return errNoSupport }
func (*deps) CoordinateFuzzing(time.Duration, int64, time.Duration, int64, int, []corpusEntry, []reflect.Type, string, string) error {
	return errNoSupport
}
func (*deps) RunFuzzWorker(func(corpusEntry) error) error              { return errNoSupport }
func (*deps) ReadCorpus(string, []reflect.Type) ([]corpusEntry, error) { return nil, nil }
func (*deps) CheckCorpus([]any, []reflect.Type) error                  { return nil }
func (*deps) ResetCoverage()                                           {}
func (*deps) SnapshotCoverage()                                        {}
func (*deps) InitRuntimeCoverage() (string, func(string, string) (string, error), func() float64) {
	return "", nil, nil
}

var once sync.Once

// Run runs tests as `go test -v` would, with the -test.* flags given in
// args (for example "-test.run=^xpu/cpu/", "-test.timeout=10m"), and returns
// the exit code (0 when every test passed). It may be called once per
// process: package testing keeps global state.
func Run(tests []testing.InternalTest, args ...string) (code int, err error) {
	ran := false
	once.Do(func() { ran = true })
	if !ran {
		return 1, errors.New("testmain: Run called twice")
	}
	m := testing.MainStart(&deps{cache: map[string]*regexp.Regexp{}}, tests, nil, nil, nil)
	if err := flag.CommandLine.Parse(append([]string{"-test.v=true"}, args...)); err != nil {
		return 2, err
	}
	return m.Run(), nil
}
