package xpucmd_test

import (
	"context"
	"io"
	"os"

	"github.com/xpu-go/xpu/xpucmd"
)

// A backend's own xpu command is a main package that blank-imports the
// backend's driver and calls Main:
//
//	package main
//
//	import (
//		_ "example.com/mybackend"
//		"github.com/xpu-go/xpu/xpucmd"
//	)
//
//	func main() { xpucmd.Main() }
func ExampleMain() {
	_ = xpucmd.Main
}

// A command of one's own beside info, conformance and run.
func ExampleCommand() {
	hello := xpucmd.Command{
		Name:    "hello",
		Summary: "say hello",
		Run: func(_ context.Context, args []string, stdout, _ io.Writer) error {
			_, err := io.WriteString(stdout, "hello\n")
			return err
		},
	}
	code := xpucmd.Run(context.Background(), []string{"hello"}, os.Stdout, os.Stderr, hello)
	_ = code
	// Output:
	// hello
}
