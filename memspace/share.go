package memspace

import (
	"fmt"
	"sync"

	"github.com/xpu-go/xpu/xerr"
)

// MaxHandle is the longest Shared.Handle a space may give: a CUDA IPC
// handle is 64 bytes, and the rest leaves room for what a backend adds
// (the device, the owner's process).
const MaxHandle = 128

// ErrNotShareable reports a block that another process cannot map: a
// space that cannot share, a driver that refuses, a handle that names
// memory of another machine or of a dead process, or an importer that
// cannot reach the memory (devices without peer access). A communicator
// that meets it moves the bytes through host memory instead. It also
// matches ErrNotSupported.
var ErrNotShareable = xerr.NewKind("memory cannot be shared with another process", xerr.ErrNotSupported)

// Shared describes a block of one process's memory that another process
// of the same machine can map: what a communicator sends instead of the
// bytes when both ends share a machine (CUDA IPC). It is plain data and
// travels between processes as such.
type Shared struct {
	// Kind names the sort of handle, the key an importer is registered
	// under: "cuda-ipc".
	Kind string
	// Handle names the whole allocation that holds the block, at most
	// MaxHandle bytes. Equal handles name one allocation: a new
	// allocation gets a new handle even at the same address, so an
	// importer may keep a mapping per handle.
	Handle []byte
	// Size is the length of the allocation.
	Size int64
	// Offset is where the block starts in the allocation, and Len its
	// length.
	Offset, Len int64
}

// String names the shared block without its handle's bytes.
func (s Shared) String() string {
	return fmt.Sprintf("%s[%d:%d] of %d bytes", s.Kind, s.Offset, s.Offset+s.Len, s.Size)
}

// Check reports a description that no importer should try: an empty kind
// or handle, a handle over MaxHandle, a range outside the allocation. The
// error matches ErrInvalidArgument.
func (s Shared) Check() error {
	switch {
	case s.Kind == "":
		return xerr.Detail(ErrInvalidArgument, "shared block with no kind")
	case len(s.Handle) == 0 || len(s.Handle) > MaxHandle:
		return xerr.Detail(ErrInvalidArgument, "shared block %v: handle of %d bytes (1 to %d)", s, len(s.Handle), MaxHandle)
	case s.Size <= 0 || s.Offset < 0 || s.Len < 0 || s.Offset > s.Size || s.Len > s.Size-s.Offset:
		return xerr.Detail(ErrInvalidArgument, "shared block %v: range outside the allocation", s)
	}
	return nil
}

// Sharer is a space whose blocks other processes of the same machine can
// map: CUDA device memory, through IPC handles. Found with As through
// wrappers.
type Sharer interface {
	// Share describes the allocation that holds b, and b's place in it,
	// for another process of this machine. A block the space cannot
	// share fails with an error matching ErrNotShareable; a block of
	// another space, or freed, with one matching ErrInvalidArgument.
	// Share is cheap to call per message: a space remembers what it
	// shared until the allocation is freed.
	Share(b Block) (Shared, error)
}

// Importer maps blocks that other processes shared (Sharer) into this
// process, as blocks of a space the transfer paths reach: the receiving
// end of a communicator copies from or to such a block with
// transfer.CopyBlock.
type Importer interface {
	// ImportKind is the Shared.Kind the importer maps: "cuda-ipc".
	ImportKind() string
	// Import returns a block of this process that is the range s names
	// of another process's allocation. The allocation is mapped the
	// first time and the mapping kept for later imports of the same
	// handle; done must be called once the block is no longer used.
	// An error matching ErrNotShareable says that this process cannot
	// reach the memory: the caller moves the bytes another way.
	Import(s Shared) (b Block, done func(), err error)
	// Forget unmaps the allocation handle names, as soon as no import of
	// it is in use: its owner freed it, or is gone. Forgetting a handle
	// never imported does nothing.
	Forget(handle []byte)
}

var importers struct {
	sync.Mutex
	byKind map[string][]Importer
}

// RegisterImporter makes imp the importer of handles of its kind, for
// communicators whose receiving block cannot import itself (host memory
// receiving from a device): a backend registers one while it is open,
// as it registers its transfer paths. unregister removes exactly this
// registration; the latest registration of a kind is found first.
// RegisterImporter panics if imp is nil.
func RegisterImporter(imp Importer) (unregister func()) {
	if imp == nil {
		panic("memspace: RegisterImporter of a nil importer")
	}
	kind := imp.ImportKind()
	importers.Lock()
	defer importers.Unlock()
	if importers.byKind == nil {
		importers.byKind = map[string][]Importer{}
	}
	importers.byKind[kind] = append(importers.byKind[kind], imp)
	var once sync.Once
	return func() {
		once.Do(func() {
			importers.Lock()
			defer importers.Unlock()
			list := importers.byKind[kind]
			for i := len(list) - 1; i >= 0; i-- {
				if list[i] == imp {
					list = append(list[:i:i], list[i+1:]...)
					break
				}
			}
			if len(list) == 0 {
				delete(importers.byKind, kind)
			} else {
				importers.byKind[kind] = list
			}
		})
	}
}

// ImporterFor returns the importer for s: the one of the space of into,
// when into is a block of a space that imports (found with As), so the
// mapping lands where the copy runs; else the latest registered for
// s.Kind. It reports false when there is none.
//
// A communicator that finds none, or whose Import fails with
// ErrNotShareable, moves the bytes through host memory.
func ImporterFor(s Shared, into Block) (Importer, bool) {
	if sp := into.Space(); sp != nil {
		if imp, ok := As[Importer](sp); ok && imp.ImportKind() == s.Kind {
			return imp, true
		}
	}
	importers.Lock()
	defer importers.Unlock()
	list := importers.byKind[s.Kind]
	if len(list) == 0 {
		return nil, false
	}
	return list[len(list)-1], true
}
