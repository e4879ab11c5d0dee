//go:build amd64 && !race

#include "textflag.h"

// func Release(p *uint64, v uint64)
TEXT ·Release(SB), NOSPLIT, $0-16
	MOVQ p+0(FP), AX
	MOVQ v+8(FP), BX
	MOVQ BX, (AX)
	RET

// func ReleaseRecord(w *[5]uint64, mark, a, b, c, d, done uint64)
TEXT ·ReleaseRecord(SB), NOSPLIT, $0-56
	MOVQ w+0(FP), DI
	MOVQ mark+8(FP), AX
	MOVQ AX, (DI)
	MOVQ a+16(FP), AX
	MOVQ AX, 8(DI)
	MOVQ b+24(FP), AX
	MOVQ AX, 16(DI)
	MOVQ c+32(FP), AX
	MOVQ AX, 24(DI)
	MOVQ d+40(FP), AX
	MOVQ AX, 32(DI)
	MOVQ done+48(FP), AX
	MOVQ AX, (DI)
	RET

// func ReleasePair(p *uint64, v uint64, q *uint64, w uint64)
TEXT ·ReleasePair(SB), NOSPLIT, $0-32
	MOVQ p+0(FP), DI
	MOVQ v+8(FP), AX
	MOVQ q+16(FP), SI
	MOVQ w+24(FP), BX
	MOVQ AX, (DI)
	MOVQ BX, (SI)
	RET
