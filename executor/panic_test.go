package executor_test

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/executor"
)

// A recovered panic is one line that says what panicked; the stack is in
// the error value, not in its text.
func TestPanicErrorOneLine(t *testing.T) {
	for _, c := range []struct {
		value any
		want  string
	}{
		{"boom", "panic in user code: boom"},
		{42, "panic in user code: 42"},
		{fmt.Errorf("read: %w", io.ErrUnexpectedEOF), "panic in user code: read: unexpected EOF"},
		{"first\nsecond", `panic in user code: "first\nsecond"`},
	} {
		err := executor.Catch(func() error { panic(c.value) })
		require.Error(t, err)
		assert.Equal(t, c.want, err.Error())
		assert.ErrorIs(t, err, executor.ErrPanic)
		var pe *executor.PanicError
		require.ErrorAs(t, err, &pe)
		assert.Equal(t, c.value, pe.Value)
		stack := string(pe.Stack)
		assert.True(t, strings.HasPrefix(stack, "goroutine "), "the stack as debug.Stack writes it: %q", stack)
		assert.Contains(t, stack, "TestPanicErrorOneLine", "the stack names the panicking function")
	}
	err := executor.Catch(func() error { panic(io.EOF) })
	assert.ErrorIs(t, err, io.EOF, "a panic with an error matches it")
	assert.NoError(t, executor.Catch(func() error { return nil }))
	mine := errors.New("mine")
	assert.Same(t, mine, executor.Catch(func() error { return mine }), "fn's own error comes back as it is")
}

// The error of a panic in user code prints as one line; its stack is the
// field Stack of the *PanicError, for the place that reports the error.
func ExamplePanicError() {
	err := executor.Catch(func() error {
		var counts []int
		counts[3]++ // out of range: a runtime panic
		return nil
	})
	fmt.Println(err)

	var pe *executor.PanicError
	if errors.As(err, &pe) {
		// A program would print the whole stack: os.Stderr.Write(pe.Stack).
		first, _, _ := strings.Cut(string(pe.Stack), "\n")
		fmt.Println(strings.HasPrefix(first, "goroutine "), strings.Contains(string(pe.Stack), "ExamplePanicError"))
	}
	// Output:
	// panic in user code: runtime error: index out of range [3] with length 0
	// true true
}
