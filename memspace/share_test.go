package memspace_test

import (
	"errors"
	"testing"

	"github.com/xpu-go/xpu/memspace"
)

type testImporter struct {
	memspace.Space
	kind string
}

func (t *testImporter) ImportKind() string { return t.kind }
func (t *testImporter) Import(memspace.Shared) (memspace.Block, func(), error) {
	return memspace.Block{}, nil, memspace.ErrNotShareable
}
func (t *testImporter) Forget([]byte) {}

func TestSharedCheck(t *testing.T) {
	good := memspace.Shared{Kind: "k", Handle: []byte{1}, Size: 10, Offset: 2, Len: 8}
	if err := good.Check(); err != nil {
		t.Fatalf("Check(%v) = %v, want nil", good, err)
	}
	bad := map[string]memspace.Shared{
		"no kind":        {Handle: []byte{1}, Size: 10, Len: 1},
		"no handle":      {Kind: "k", Size: 10, Len: 1},
		"long handle":    {Kind: "k", Handle: make([]byte, memspace.MaxHandle+1), Size: 10, Len: 1},
		"past the end":   {Kind: "k", Handle: []byte{1}, Size: 10, Offset: 2, Len: 9},
		"negative":       {Kind: "k", Handle: []byte{1}, Size: 10, Offset: -1, Len: 1},
		"no allocation":  {Kind: "k", Handle: []byte{1}},
		"offset too far": {Kind: "k", Handle: []byte{1}, Size: 10, Offset: 11},
	}
	for name, s := range bad {
		if err := s.Check(); !errors.Is(err, memspace.ErrInvalidArgument) {
			t.Errorf("%s: Check(%v) = %v, want ErrInvalidArgument", name, s, err)
		}
	}
}

func TestImporterFor(t *testing.T) {
	s := memspace.Shared{Kind: "test-kind", Handle: []byte{1}, Size: 1, Len: 1}
	if _, ok := memspace.ImporterFor(s, memspace.Block{}); ok {
		t.Fatal("an importer found before any was registered")
	}
	a, b := &testImporter{kind: "test-kind"}, &testImporter{kind: "test-kind"}
	unA := memspace.RegisterImporter(a)
	unB := memspace.RegisterImporter(b)
	if imp, _ := memspace.ImporterFor(s, memspace.Block{}); imp != b {
		t.Fatalf("ImporterFor = %v, want the latest registered", imp)
	}
	unB()
	unB() // a second call removes nothing more
	if imp, _ := memspace.ImporterFor(s, memspace.Block{}); imp != a {
		t.Fatalf("ImporterFor after unregistering the latest = %v, want the first", imp)
	}
	// A block whose space imports this kind is preferred to the registry;
	// one that imports another kind is not.
	own := &testImporter{Space: memspace.GoHeap, kind: "test-kind"}
	other := &testImporter{Space: memspace.GoHeap, kind: "other-kind"}
	if imp, _ := memspace.ImporterFor(s, memspace.NewBlock(own, 1, 1, nil)); imp != own {
		t.Fatalf("ImporterFor a block of an importing space = %v, want that space", imp)
	}
	if imp, _ := memspace.ImporterFor(s, memspace.NewBlock(other, 1, 1, nil)); imp != a {
		t.Fatalf("ImporterFor a block whose space imports another kind = %v, want the registered one", imp)
	}
	unA()
	if _, ok := memspace.ImporterFor(s, memspace.Block{}); ok {
		t.Fatal("an importer found after every one was unregistered")
	}
	if !errors.Is(memspace.ErrNotShareable, memspace.ErrNotSupported) {
		t.Fatal("ErrNotShareable does not match ErrNotSupported")
	}
}
