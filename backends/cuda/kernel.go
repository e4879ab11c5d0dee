package cuda

import (
	"fmt"
	"math"
	"strings"
	"sync"

	"github.com/xpu-go/xpu/backends/cuda/internal/cu"
	"github.com/xpu-go/xpu/executor"
	"github.com/xpu-go/xpu/memspace"
	"github.com/xpu-go/xpu/xerr"
)

var (
	// ErrBadModule reports PTX (or a cubin) the driver could not load; the
	// message carries the JIT compiler's log.
	ErrBadModule = xerr.NewKind("module does not load", xerr.ErrInvalidArgument)
	// ErrNoSuchKernel reports a kernel name a module does not have.
	ErrNoSuchKernel = xerr.NewKind("no such kernel", xerr.ErrInvalidArgument)
)

// Module is code loaded onto an executor's device.
type Module struct {
	x *Executor
	h cu.Module

	mu    sync.Mutex
	funcs map[string]*Function
}

// LoadModule loads PTX text (or a cubin image) onto the executor's device.
// PTX the driver's JIT rejects is an error matching ErrBadModule with the
// JIT's log. Close unloads it; closing the executor unloads it too.
func (x *Executor) LoadModule(image string) (*Module, error) {
	if !strings.HasSuffix(image, "\x00") {
		image += "\x00"
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return nil, xerr.Dev(Name, x.d.idx, "load-module", executor.ErrClosed)
	}
	h, log, err := x.d.lib.ModuleLoad(x.d.ctx, image)
	if err != nil {
		if r, ok := cu.ResultOf(err); ok && !r.Sticky() && r != cu.ErrOutOfMemory {
			if log == "" {
				log = "no log"
			}
			return nil, xerr.Dev(Name, x.d.idx, "load-module",
				xerr.Detail(ErrBadModule, "%w: %s", err, strings.Join(strings.Fields(log), " ")))
		}
		return nil, devErr(x.d.idx, "load-module", err)
	}
	m := &Module{x: x, h: h, funcs: map[string]*Function{}}
	x.modules[m] = struct{}{}
	return m, nil
}

// Function returns the kernel called name.
func (m *Module) Function(name string) (*Function, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if f, ok := m.funcs[name]; ok {
		return f, nil
	}
	var h cu.Function
	err := m.use("function", func() error {
		var err error
		h, err = m.x.d.lib.ModuleFunction(m.x.d.ctx, m.h, name)
		return err
	})
	if err != nil {
		if r, ok := cu.ResultOf(err); ok && r == cu.ErrNotFound {
			return nil, xerr.Dev(Name, m.x.d.idx, "function", xerr.Detail(ErrNoSuchKernel, "%q", name))
		}
		return nil, err
	}
	f := &Function{m: m, h: h, name: name}
	m.funcs[name] = f
	return f, nil
}

// use runs f unless the module or its executor has closed.
func (m *Module) use(op string, f func() error) error {
	m.x.mu.RLock()
	defer m.x.mu.RUnlock()
	if _, open := m.x.modules[m]; !open {
		return xerr.Dev(Name, m.x.d.idx, op, executor.ErrClosed)
	}
	return devErr(m.x.d.idx, op, f())
}

// Close unloads the module. Work already submitted that uses it must have
// completed (synchronize its streams first).
func (m *Module) Close() error {
	m.x.mu.Lock()
	defer m.x.mu.Unlock()
	if _, open := m.x.modules[m]; !open {
		return xerr.Dev(Name, m.x.d.idx, "close-module", executor.ErrClosed)
	}
	delete(m.x.modules, m)
	return devErr(m.x.d.idx, "close-module", m.x.d.lib.ModuleUnload(m.x.d.ctx, m.h))
}

// Function is a kernel of a Module.
type Function struct {
	m    *Module
	h    cu.Function
	name string
}

// Name is the kernel's name.
func (f *Function) Name() string { return f.name }

// Dim3 is the shape of a grid (in blocks) or of a block (in threads); a
// zero Y or Z is 1.
type Dim3 struct{ X, Y, Z int }

// Config says how to launch a kernel.
type Config struct {
	Grid   Dim3 // blocks
	Block  Dim3 // threads per block
	Shared int  // bytes of dynamic shared memory per block
}

func (d Dim3) cu(what string) (cu.Dim3, error) {
	if d.Y == 0 {
		d.Y = 1
	}
	if d.Z == 0 {
		d.Z = 1
	}
	for _, v := range []int{d.X, d.Y, d.Z} {
		if v < 1 || v > math.MaxUint32 {
			return cu.Dim3{}, xerr.Detail(xerr.ErrInvalidArgument, "%s %dx%dx%d: every extent must be in [1, 2^32)", what, d.X, d.Y, d.Z)
		}
	}
	return cu.Dim3{X: uint32(d.X), Y: uint32(d.Y), Z: uint32(d.Z)}, nil
}

// Launch launches the kernel on s, a Stream of the module's device, with
// args in the order of the kernel's parameters. An argument is a
// memspace.Block or a *memspace.Buffer of CUDA memory the device can
// address (passed as its device address), or a number: int8, uint8 and
// bool take one byte; int16 and uint16 two; int32, uint32 and float32
// four; int, uint, int64, uint64, uintptr, float64 and complex64 eight;
// complex128 sixteen. The types must match the kernel's parameters: the
// driver cannot check them. A bad configuration (a grid or block out of
// the device's limits, too much shared memory) is an error matching
// xerr.ErrInvalidArgument.
func (f *Function) Launch(s executor.Stream, cfg Config, args ...any) error {
	st, err := f.stream(s)
	if err != nil {
		return err
	}
	var a cu.Args
	if err := f.m.x.pack(&a, args); err != nil {
		return xerr.Dev(Name, f.m.x.d.idx, "launch "+f.name, err)
	}
	return st.launch(f, cfg, &a)
}

func (f *Function) stream(s executor.Stream) (*Stream, error) {
	st, ok := s.(*Stream)
	if !ok {
		return nil, xerr.Dev(Name, f.m.x.d.idx, "launch "+f.name,
			xerr.Detail(xerr.ErrNotSupported, "stream %T is not a cuda stream", s))
	}
	if st.x.d.idx != f.m.x.d.idx || st.x.d.lib != f.m.x.d.lib {
		return nil, xerr.Dev(Name, f.m.x.d.idx, "launch "+f.name,
			xerr.Detail(xerr.ErrInvalidArgument, "stream of device %d, module of device %d", st.x.d.idx, f.m.x.d.idx))
	}
	return st, nil
}

func (s *Stream) launch(f *Function, cfg Config, a *cu.Args) error {
	grid, err := cfg.Grid.cu("grid")
	if err == nil {
		var block cu.Dim3
		if block, err = cfg.Block.cu("block"); err == nil {
			if cfg.Shared < 0 || cfg.Shared > math.MaxUint32 {
				err = xerr.Detail(xerr.ErrInvalidArgument, "shared memory %d bytes", cfg.Shared)
			} else {
				l, cx, h := s.x.d.lib, s.x.d.ctx, f.h
				m := f.m
				return s.submit("launch "+f.name, func() error {
					// s.x (which is m.x) is read-locked here.
					if _, open := m.x.modules[m]; !open {
						return xerr.Detail(executor.ErrClosed, "module")
					}
					return l.Launch(cx, h, grid, block, uint32(cfg.Shared), s.h, a)
				})
			}
		}
	}
	return xerr.Dev(Name, s.x.d.idx, "launch "+f.name, err)
}

// blocker is what a *memspace.Buffer is to Launch.
type blocker interface{ Block() memspace.Block }

func (x *Executor) pack(a *cu.Args, args []any) error {
	if len(args) > cu.MaxArgs {
		return xerr.Detail(xerr.ErrInvalidArgument, "%d arguments, at most %d", len(args), cu.MaxArgs)
	}
	for i, v := range args {
		switch v := v.(type) {
		case memspace.Block:
			p, err := x.devicePointer(v)
			if err != nil {
				return fmt.Errorf("argument %d: %w", i, err)
			}
			a.Ptr(p)
		case blocker:
			p, err := x.devicePointer(v.Block())
			if err != nil {
				return fmt.Errorf("argument %d: %w", i, err)
			}
			a.Ptr(p)
		case bool:
			var b uint8
			if v {
				b = 1
			}
			a.U8(b)
		case int8:
			a.U8(uint8(v))
		case uint8:
			a.U8(v)
		case int16:
			a.U16(uint16(v))
		case uint16:
			a.U16(v)
		case int32:
			a.U32(uint32(v))
		case uint32:
			a.U32(v)
		case float32:
			a.U32(math.Float32bits(v))
		case int:
			a.U64(uint64(v))
		case uint:
			a.U64(uint64(v))
		case int64:
			a.U64(uint64(v))
		case uint64:
			a.U64(v)
		case uintptr:
			a.U64(uint64(v))
		case float64:
			a.U64(math.Float64bits(v))
		case complex64:
			a.U64(uint64(math.Float32bits(real(v))) | uint64(math.Float32bits(imag(v)))<<32)
		case complex128:
			a.U128(math.Float64bits(real(v)), math.Float64bits(imag(v)))
		default:
			return xerr.Detail(xerr.ErrInvalidArgument, "argument %d has type %T, which a kernel cannot take", i, v)
		}
	}
	return nil
}

// devicePointer is the device address of a block the executor's device
// can address: its own device memory, or pinned or managed memory.
func (x *Executor) devicePointer(b memspace.Block) (cu.DevPtr, error) {
	sp, ok := memspace.As[*Space](b.Space())
	if !ok {
		name := "<nil>"
		if b.Space() != nil {
			name = b.Space().Name()
		}
		return 0, xerr.Detail(xerr.ErrInvalidArgument, "block %v of space %s is not CUDA memory", b, name)
	}
	if sp.kind == KindDevice && (sp.d.idx != x.d.idx || sp.d.lib != x.d.lib) {
		return 0, xerr.Detail(xerr.ErrInvalidArgument, "block %v is memory of device %d, the kernel runs on device %d", b, sp.d.idx, x.d.idx)
	}
	if err := sp.holds(b.Addr(), b.Len()); err != nil {
		return 0, err
	}
	return cu.DevPtr(b.Addr()), nil
}
