package hostcopy

import (
	"testing"
)

func TestGrain(t *testing.T) {
	for _, tc := range []struct{ n, w, want int }{
		{1, 4, 0}, {SplitMin - 1, 4, 0},
		{SplitMin, 4, Piece}, {StreamMin - 1, 1, Piece},
		{StreamMin, 4, StreamMin / 4}, {StreamMin + 65, 4, StreamMin/4 + 64},
		{StreamMin, 0, StreamMin}, {StreamMin + 1, 3, (StreamMin/3 + 1 + 63) &^ 63},
	} {
		if got := Grain(tc.n, tc.w); got != tc.want {
			t.Errorf("Grain(%d, %d) = %d, want %d", tc.n, tc.w, got, tc.want)
		}
	}
}

// Sizes keeps what it promises whatever the constants are: each size is in
// the mode its description names, and the odd ones leave a short last piece
// for every worker count.
func TestSizes(t *testing.T) {
	s := Sizes()
	if len(s) != 5 {
		t.Fatalf("Sizes has %d entries; this test knows 5", len(s))
	}
	for i := 1; i < len(s); i++ {
		if s[i].N <= s[i-1].N {
			t.Errorf("Sizes not ascending: %d after %d", s[i].N, s[i-1].N)
		}
	}
	mode := func(n int) int { // 0 one memmove, 1 fixed pieces, 2 streamed
		switch g := Grain(n, 4); {
		case g == 0:
			return 0
		case g == Piece && n < StreamMin:
			return 1
		default:
			return 2
		}
	}
	for _, c := range []struct {
		i, mode int
	}{{0, 0}, {1, 1}, {2, 1}, {3, 1}, {4, 2}} {
		if got := mode(s[c.i].N); got != c.mode {
			t.Errorf("Sizes()[%d] = %d (%s) is in mode %d, want %d", c.i, s[c.i].N, s[c.i].What, got, c.mode)
		}
	}
	if mode(s[0].N+1) != 1 || mode(StreamMin-1) != 1 || s[4].N-StreamMin >= PieceAlign {
		t.Errorf("Sizes()[0] and [4] are not on either side of the split points")
	}
	if s[2].N%Piece != 1 {
		t.Errorf("Sizes()[2] = %d does not end in a 1-byte piece", s[2].N)
	}
	if s[3].N/Piece < 3 || s[3].N%2 == 0 {
		t.Errorf("Sizes()[3] = %d is not several pieces and an odd tail", s[3].N)
	}
	for w := 1; w <= 64; w++ {
		n := s[4].N
		if g := Grain(n, w); n%g == 0 {
			t.Errorf("Sizes()[4] = %d has no short last piece over %d workers (grain %d)", n, w, g)
		}
	}
}
