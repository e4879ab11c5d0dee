//go:build amd64 && !race

#include "textflag.h"

// func Release(p *uint64, v uint64)
TEXT ·Release(SB), NOSPLIT, $0-16
	MOVQ p+0(FP), AX
	MOVQ v+8(FP), BX
	MOVQ BX, (AX)
	RET

// func ReleaseWords(dst, src []uint64)
TEXT ·ReleaseWords(SB), NOSPLIT, $0-48
	MOVQ dst_base+0(FP), DI
	MOVQ dst_len+8(FP), CX
	MOVQ src_base+24(FP), SI
	MOVQ src_len+32(FP), DX
	CMPQ DX, CX
	CMOVQLT DX, CX
	TESTQ CX, CX
	JEQ done
loop:
	MOVQ (SI), AX
	MOVQ AX, (DI)
	ADDQ $8, SI
	ADDQ $8, DI
	DECQ CX
	JNE loop
done:
	RET
