package launch

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLineWriterPieces(t *testing.T) {
	text := "alpha\nbeta\n\ngamma delta\nlast without newline"
	want := "[7] alpha\n[7] beta\n[7] \n[7] gamma delta\n[7] last without newline\n"
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		var buf bytes.Buffer
		out := newOutput(&buf, nil)
		l := newLineWriter(out, &buf, "[7] ")
		for p := []byte(text); len(p) > 0; {
			k := min(len(p), 1+rng.IntN(8))
			n, err := l.Write(p[:k])
			require.NoError(t, err)
			require.Equal(t, k, n)
			// Only whole lines are ever written.
			require.True(t, buf.Len() == 0 || strings.HasSuffix(buf.String(), "\n"))
			p = p[k:]
		}
		l.flush()
		require.Equal(t, want, buf.String())
	}
}

func TestLineWriterLongLine(t *testing.T) {
	var buf bytes.Buffer
	l := newLineWriter(newOutput(&buf, nil), &buf, "[0] ")
	l.max = 10
	_, _ = l.Write([]byte("0123456789012"))
	_, _ = l.Write([]byte("3456789012345\nshort\n"))
	l.flush()
	assert.Equal(t, "[0] 0123456789\n[0] 0123456789\n[0] 012345\n[0] short\n", buf.String())
}

func TestLineWriterFlushEmpty(t *testing.T) {
	var buf bytes.Buffer
	l := newLineWriter(newOutput(&buf, nil), &buf, "[0] ")
	_, _ = l.Write([]byte("done\n"))
	l.flush()
	l.flush()
	assert.Equal(t, "[0] done\n", buf.String())
}

type failWriter struct{ calls int }

func (f *failWriter) Write(p []byte) (int, error) {
	f.calls++
	return 0, errors.New("broken")
}

// A destination that fails must not stop the copy: the rank would block on
// a full pipe.
func TestLineWriterSwallowsWriteErrors(t *testing.T) {
	var f failWriter
	out := newOutput(&f, &f)
	l := newLineWriter(out, &f, "[0] ")
	n, err := l.Write([]byte("a\nb\n"))
	require.NoError(t, err)
	assert.Equal(t, 4, n)
	n, err = l.Write([]byte("c\n"))
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	assert.Equal(t, 2, f.calls)
	assert.EqualError(t, out.err, "broken")
}
