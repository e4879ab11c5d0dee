#include "textflag.h"

// func PrefetchWrite(p *byte)
TEXT ·PrefetchWrite(SB), NOSPLIT, $0-8
	MOVQ p+0(FP), AX
	// PREFETCHW (AX), spelled in bytes (0F 0D /1): the assembler has no
	// name for it. Processors without the instruction run it as a no-op.
	BYTE $0x0F; BYTE $0x0D; BYTE $0x08
	RET
