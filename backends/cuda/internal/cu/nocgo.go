//go:build !cgo

package cu

import "unsafe"

var _ unsafe.Pointer

// Lib is a loaded driver library; without cgo none can be loaded.
type Lib struct {
	path    string
	version int
}

// Open fails: loading the driver needs cgo.
func Open(path string) (*Lib, error) { return nil, ErrNoCgo }

// VersionString formats a driver version as "12.4".
func VersionString(v int) string { return itoa(v/1000) + "." + itoa(v%1000/10) }

func itoa(v int) string {
	if v < 10 {
		return string(rune('0' + v))
	}
	return itoa(v/10) + string(rune('0'+v%10))
}

func (l *Lib) Path() string { return l.path }

func (l *Lib) Version() int { return l.version }

func (l *Lib) DriverVersion() (r0 int, err error) { err = ErrNoCgo; return }

func (l *Lib) DeviceCount() (r0 int, err error) { err = ErrNoCgo; return }

func (l *Lib) Device(i int) (r0 int, err error) { err = ErrNoCgo; return }

func (l *Lib) DeviceName(d int) (r0 string, err error) { err = ErrNoCgo; return }

func (l *Lib) DeviceUUID(d int) (r0 string, err error) { err = ErrNoCgo; return }

func (l *Lib) DeviceTotalMem(d int) (r0 int64, err error) { err = ErrNoCgo; return }

func (l *Lib) DeviceAttribute(d, attr int) (r0 int, err error) { err = ErrNoCgo; return }

func (l *Lib) DevicePCIBusID(d int) (r0 string, err error) { err = ErrNoCgo; return }

func (l *Lib) CanAccessPeer(d, peer int) (r0 bool, err error) { err = ErrNoCgo; return }

func (l *Lib) PrimaryCtxRetain(d int) (r0 Context, err error) { err = ErrNoCgo; return }

func (l *Lib) PrimaryCtxRelease(d int) error { return ErrNoCgo }

func (l *Lib) CtxCurrent() (r0 Context, err error) { err = ErrNoCgo; return }

func (l *Lib) CtxSynchronize(ctx Context) error { return ErrNoCgo }

func (l *Lib) EnablePeerAccess(ctx, peer Context) error { return ErrNoCgo }

func (l *Lib) MemGetInfo(ctx Context) (free, total int64, err error) { err = ErrNoCgo; return }

func (l *Lib) MemAlloc(ctx Context, n int) (r0 DevPtr, err error) { err = ErrNoCgo; return }

func (l *Lib) MemFree(ctx Context, p DevPtr) error { return ErrNoCgo }

func (l *Lib) MemHostAlloc(ctx Context, n int, flags uint) (r0 unsafe.Pointer, err error) {
	err = ErrNoCgo
	return
}

func (l *Lib) MemFreeHost(ctx Context, p unsafe.Pointer) error { return ErrNoCgo }

func (l *Lib) MemAllocManaged(ctx Context, n int) (r0 DevPtr, err error) { err = ErrNoCgo; return }

func (l *Lib) HostDevicePointer(ctx Context, p unsafe.Pointer) (r0 DevPtr, err error) {
	err = ErrNoCgo
	return
}

func (l *Lib) Memcpy(ctx Context, dst, src DevPtr, n int) error { return ErrNoCgo }

func (l *Lib) MemcpyAsync(ctx Context, dst, src DevPtr, n int, s Stream) error { return ErrNoCgo }

func (l *Lib) MemcpyHtoD(ctx Context, dst DevPtr, src unsafe.Pointer, n int) error { return ErrNoCgo }

func (l *Lib) MemcpyDtoH(ctx Context, dst unsafe.Pointer, src DevPtr, n int) error { return ErrNoCgo }

func (l *Lib) MemcpyDtoD(ctx Context, dst, src DevPtr, n int) error { return ErrNoCgo }

func (l *Lib) MemcpyHtoDAsync(ctx Context, dst DevPtr, src unsafe.Pointer, n int, s Stream) error {
	return ErrNoCgo
}

func (l *Lib) MemcpyDtoHAsync(ctx Context, dst unsafe.Pointer, src DevPtr, n int, s Stream) error {
	return ErrNoCgo
}

func (l *Lib) MemcpyDtoDAsync(ctx Context, dst, src DevPtr, n int, s Stream) error { return ErrNoCgo }

func (l *Lib) MemcpyPeer(ctx Context, dst DevPtr, dctx Context, src DevPtr, sctx Context, n int) error {
	return ErrNoCgo
}

func (l *Lib) MemcpyPeerAsync(ctx Context, dst DevPtr, dctx Context, src DevPtr, sctx Context, n int, s Stream) error {
	return ErrNoCgo
}

func (l *Lib) MemsetD8(ctx Context, p DevPtr, v byte, n int) error { return ErrNoCgo }

func (l *Lib) MemsetD8Async(ctx Context, p DevPtr, v byte, n int, s Stream) error { return ErrNoCgo }

func (l *Lib) MemsetD16Async(ctx Context, p DevPtr, v uint16, n int, s Stream) error { return ErrNoCgo }

func (l *Lib) MemsetD32Async(ctx Context, p DevPtr, v uint32, n int, s Stream) error { return ErrNoCgo }

func (l *Lib) StreamCreate(ctx Context) (r0 Stream, err error) { err = ErrNoCgo; return }

func (l *Lib) StreamDestroy(ctx Context, s Stream) error { return ErrNoCgo }

func (l *Lib) StreamSynchronize(s Stream) error { return ErrNoCgo }

func (l *Lib) StreamQuery(s Stream) error { return ErrNoCgo }

func (l *Lib) StreamWaitEvent(ctx Context, s Stream, e Event) error { return ErrNoCgo }

func (l *Lib) EventCreate(ctx Context, flags uint) (r0 Event, err error) { err = ErrNoCgo; return }

func (l *Lib) EventRecord(ctx Context, e Event, s Stream) error { return ErrNoCgo }

func (l *Lib) EventQuery(e Event) error { return ErrNoCgo }

func (l *Lib) EventSynchronize(e Event) error { return ErrNoCgo }

func (l *Lib) EventElapsed(start, end Event) (r0 float32, err error) { err = ErrNoCgo; return }

func (l *Lib) EventDestroy(ctx Context, e Event) error { return ErrNoCgo }

func (l *Lib) ModuleLoad(ctx Context, image string) (r0 Module, r1 string, err error) {
	err = ErrNoCgo
	return
}

func (l *Lib) ModuleUnload(ctx Context, m Module) error { return ErrNoCgo }

func (l *Lib) ModuleFunction(ctx Context, m Module, name string) (r0 Function, err error) {
	err = ErrNoCgo
	return
}

func (l *Lib) Launch(ctx Context, f Function, grid, block Dim3, shared uint32, s Stream, args *Args) error {
	return ErrNoCgo
}

func (l *Lib) ErrorString(r Result) string { return "" }

func (l *Lib) HasIPC() bool { return false }

func (l *Lib) WithoutIPC() *Lib { c := *l; return &c }

func (l *Lib) IpcGetMemHandle(ctx Context, p DevPtr) (r0 IPCHandle, err error) {
	err = ErrNoCgo
	return
}

func (l *Lib) IpcOpenMemHandle(ctx Context, h IPCHandle, flags uint) (r0 DevPtr, err error) {
	err = ErrNoCgo
	return
}

func (l *Lib) IpcCloseMemHandle(ctx Context, p DevPtr) error { return ErrNoCgo }
