package xpucmdtest_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/xpu-go/xpu/xpucmd/xpucmdtest"
)

// The child plays a command that prints its arguments and exits with the
// status its first one names ("ok": returns from main).
func TestMain(m *testing.M) {
	xpucmdtest.Main(func() {
		fmt.Println("args:", strings.Join(os.Args[1:], " "))
		fmt.Fprintln(os.Stderr, "to stderr")
		if os.Args[1] != "ok" {
			os.Exit(3)
		}
	})
	os.Exit(m.Run())
}

func TestRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	code, stdout, stderr := xpucmdtest.Run(ctx, t, "ok", "a b", `"c"`)
	assert.Equal(t, 0, code)
	assert.Equal(t, "args: ok a b \"c\"\n", stdout)
	assert.Equal(t, "to stderr\n", stderr)

	code, stdout, _ = xpucmdtest.Run(ctx, t, "fail")
	assert.Equal(t, 3, code)
	assert.Equal(t, "args: fail\n", stdout)
}
