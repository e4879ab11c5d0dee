package executor

import (
	"fmt"
	"runtime/debug"
)

// PanicError is the error a recovered panic in user code becomes. It
// matches ErrPanic.
type PanicError struct {
	Value any    // the value passed to panic
	Stack []byte // the stack of the panicking goroutine
}

func (e *PanicError) Error() string {
	return fmt.Sprintf("panic in user code: %v\n%s", e.Value, e.Stack)
}

// Is matches ErrPanic.
func (e *PanicError) Is(target error) bool { return target == ErrPanic }

// Unwrap returns the panic value when it is an error.
func (e *PanicError) Unwrap() error {
	if err, ok := e.Value.(error); ok {
		return err
	}
	return nil
}

// Catch runs fn and returns its error, or a *PanicError if it panics.
// Backends use it around user code.
func Catch(fn func() error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &PanicError{Value: v, Stack: debug.Stack()}
		}
	}()
	return fn()
}
