//go:build !unix

package flight

import "os"

// DumpSignal is the signal that makes a process whose environment names
// a DumpDir write its records there; none where signals are not Unix's:
// the records are written through the API (WriteAll) and on revocation
// only.
var DumpSignal os.Signal

type watcher struct{}

func startWatch() *watcher { return nil }

func (*watcher) stop() {}
