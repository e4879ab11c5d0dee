//go:build amd64 && !race

#include "textflag.h"

// func Release(p *uint64, v uint64)
TEXT ·Release(SB), NOSPLIT, $0-16
	MOVQ p+0(FP), AX
	MOVQ v+8(FP), BX
	MOVQ BX, (AX)
	RET
