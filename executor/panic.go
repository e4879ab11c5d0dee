package executor

import (
	"fmt"
	"runtime/debug"
	"strconv"
	"strings"
)

// PanicError is the error a recovered panic in user code becomes. It
// matches ErrPanic, and the panic's value too when that is an error.
//
// Its Error is one line, "panic in user code: " and the value (quoted
// when the value's text has line breaks), as every error of the module is;
// the stack of the panicking goroutine is in Stack, for a program to print
// where it reports the error (see the example).
type PanicError struct {
	// Value is the value passed to panic.
	Value any
	// Stack is the stack of the panicking goroutine when it was recovered,
	// as runtime/debug.Stack writes it: several lines, innermost call
	// first, the frames of the recovery and of the panic itself included.
	Stack []byte
}

func (e *PanicError) Error() string {
	v := fmt.Sprint(e.Value)
	if strings.ContainsAny(v, "\r\n") {
		v = strconv.Quote(v)
	}
	return "panic in user code: " + v
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
