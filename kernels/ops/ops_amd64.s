//go:build amd64 && !purego

#include "textflag.h"
#include "exp_amd64.h"

// Every function here repeats the Go version named in dispatch_amd64.go
// operation for operation (separate multiplies and adds, the same lane
// order), so results are bit-identical to it (TestPathsBitIdentical). The
// AVX2 versions keep 16 lanes as two registers: lanes 0-7 and 8-15.
// Lengths n are multiples of 16 (8 for rotate256's half width); the Go side
// handles tails.

// ---- sum of squares ----

// func sumSq512(acc *[16]float32, x *float32, n int)
TEXT ·sumSq512(SB), NOSPLIT, $0-24
	MOVQ acc+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ n+16(FP), CX
	VMOVUPS (DI), Z0
ss512:
	TESTQ CX, CX
	JLE   ss512done
	VMOVUPS (SI), Z1
	VMULPS Z1, Z1, Z1
	VADDPS Z1, Z0, Z0
	ADDQ $64, SI
	SUBQ $16, CX
	JMP  ss512
ss512done:
	VMOVUPS Z0, (DI)
	VZEROUPPER
	RET

// func sumSq256(acc *[16]float32, x *float32, n int)
TEXT ·sumSq256(SB), NOSPLIT, $0-24
	MOVQ acc+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ n+16(FP), CX
	VMOVUPS (DI), Y0
	VMOVUPS 32(DI), Y1
ss256:
	TESTQ CX, CX
	JLE   ss256done
	VMOVUPS (SI), Y2
	VMOVUPS 32(SI), Y3
	VMULPS Y2, Y2, Y2
	VMULPS Y3, Y3, Y3
	VADDPS Y2, Y0, Y0
	VADDPS Y3, Y1, Y1
	ADDQ $64, SI
	SUBQ $16, CX
	JMP  ss256
ss256done:
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	VZEROUPPER
	RET

// func addSumSq512(acc *[16]float32, res, x *float32, n int)
TEXT ·addSumSq512(SB), NOSPLIT, $0-32
	MOVQ acc+0(FP), DI
	MOVQ res+8(FP), SI
	MOVQ x+16(FP), DX
	MOVQ n+24(FP), CX
	VMOVUPS (DI), Z0
as512:
	TESTQ CX, CX
	JLE   as512done
	VMOVUPS (SI), Z1
	VADDPS (DX), Z1, Z1
	VMOVUPS Z1, (SI)
	VMULPS Z1, Z1, Z1
	VADDPS Z1, Z0, Z0
	ADDQ $64, SI
	ADDQ $64, DX
	SUBQ $16, CX
	JMP  as512
as512done:
	VMOVUPS Z0, (DI)
	VZEROUPPER
	RET

// func addSumSq256(acc *[16]float32, res, x *float32, n int)
TEXT ·addSumSq256(SB), NOSPLIT, $0-32
	MOVQ acc+0(FP), DI
	MOVQ res+8(FP), SI
	MOVQ x+16(FP), DX
	MOVQ n+24(FP), CX
	VMOVUPS (DI), Y0
	VMOVUPS 32(DI), Y1
as256:
	TESTQ CX, CX
	JLE   as256done
	VMOVUPS (SI), Y2
	VMOVUPS 32(SI), Y3
	VADDPS (DX), Y2, Y2
	VADDPS 32(DX), Y3, Y3
	VMOVUPS Y2, (SI)
	VMOVUPS Y3, 32(SI)
	VMULPS Y2, Y2, Y2
	VMULPS Y3, Y3, Y3
	VADDPS Y2, Y0, Y0
	VADDPS Y3, Y1, Y1
	ADDQ $64, SI
	ADDQ $64, DX
	SUBQ $16, CX
	JMP  as256
as256done:
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	VZEROUPPER
	RET

// ---- out = (x·r)·w ----

// func scaleMul512(out, x, w *float32, n int, r float32)
TEXT ·scaleMul512(SB), NOSPLIT, $0-36
	MOVQ out+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ w+16(FP), DX
	MOVQ n+24(FP), CX
	VBROADCASTSS r+32(FP), Z9
sm512:
	TESTQ CX, CX
	JLE   sm512done
	VMULPS (SI), Z9, Z1
	VMULPS (DX), Z1, Z1
	VMOVUPS Z1, (DI)
	ADDQ $64, SI
	ADDQ $64, DX
	ADDQ $64, DI
	SUBQ $16, CX
	JMP  sm512
sm512done:
	VZEROUPPER
	RET

// func scaleMul256(out, x, w *float32, n int, r float32)
TEXT ·scaleMul256(SB), NOSPLIT, $0-36
	MOVQ out+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ w+16(FP), DX
	MOVQ n+24(FP), CX
	VBROADCASTSS r+32(FP), Y9
sm256:
	TESTQ CX, CX
	JLE   sm256done
	VMULPS (SI), Y9, Y1
	VMULPS 32(SI), Y9, Y2
	VMULPS (DX), Y1, Y1
	VMULPS 32(DX), Y2, Y2
	VMOVUPS Y1, (DI)
	VMOVUPS Y2, 32(DI)
	ADDQ $64, SI
	ADDQ $64, DX
	ADDQ $64, DI
	SUBQ $16, CX
	JMP  sm256
sm256done:
	VZEROUPPER
	RET

// func divide512(out, x *float32, n int, d float32)  (Divide's Go loop, n % 16 == 0)
TEXT ·divide512(SB), NOSPLIT, $0-28
	MOVQ out+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ n+16(FP), CX
	VBROADCASTSS d+24(FP), Z9
dv512:
	TESTQ CX, CX
	JLE   dv512done
	VMOVUPS (SI), Z1
	VDIVPS Z9, Z1, Z1
	VMOVUPS Z1, (DI)
	ADDQ $64, SI
	ADDQ $64, DI
	SUBQ $16, CX
	JMP  dv512
dv512done:
	VZEROUPPER
	RET

// func divide256(out, x *float32, n int, d float32)  (Divide's Go loop, n % 16 == 0)
TEXT ·divide256(SB), NOSPLIT, $0-28
	MOVQ out+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ n+16(FP), CX
	VBROADCASTSS d+24(FP), Y9
dv256:
	TESTQ CX, CX
	JLE   dv256done
	VMOVUPS (SI), Y1
	VMOVUPS 32(SI), Y2
	VDIVPS Y9, Y1, Y1
	VDIVPS Y9, Y2, Y2
	VMOVUPS Y1, (DI)
	VMOVUPS Y2, 32(DI)
	ADDQ $64, SI
	ADDQ $64, DI
	SUBQ $16, CX
	JMP  dv256
dv256done:
	VZEROUPPER
	RET

// ---- RoPE ----

// func rotate512(x, cs *float32, h, heads int)  (h % 16 == 0)
TEXT ·rotate512(SB), NOSPLIT, $0-32
	MOVQ x+0(FP), SI
	MOVQ cs+8(FP), DI
	MOVQ h+16(FP), R8
	MOVQ heads+24(FP), CX
	SHLQ $2, R8              // h in bytes
rt512head:
	TESTQ CX, CX
	JLE   rt512done
	XORQ R9, R9
rt512:
	LEAQ (SI)(R8*1), R10     // b = a + h
	VMOVUPS (SI)(R9*1), Z0   // x0
	VMOVUPS (R10)(R9*1), Z1  // x1
	LEAQ (DI)(R8*1), R11
	VMOVUPS (DI)(R9*1), Z2   // cos
	VMOVUPS (R11)(R9*1), Z3  // sin
	VMULPS Z2, Z0, Z4
	VMULPS Z3, Z1, Z5
	VSUBPS Z5, Z4, Z4        // x0·c − x1·s
	VMULPS Z2, Z1, Z6
	VMULPS Z3, Z0, Z7
	VADDPS Z7, Z6, Z6        // x1·c + x0·s
	VMOVUPS Z4, (SI)(R9*1)
	VMOVUPS Z6, (R10)(R9*1)
	ADDQ $64, R9
	CMPQ R9, R8
	JLT  rt512
	LEAQ (SI)(R8*2), SI
	DECQ CX
	JMP  rt512head
rt512done:
	VZEROUPPER
	RET

// func rotate256(x, cs *float32, h, heads int)  (h % 8 == 0)
TEXT ·rotate256(SB), NOSPLIT, $0-32
	MOVQ x+0(FP), SI
	MOVQ cs+8(FP), DI
	MOVQ h+16(FP), R8
	MOVQ heads+24(FP), CX
	SHLQ $2, R8
rt256head:
	TESTQ CX, CX
	JLE   rt256done
	XORQ R9, R9
rt256:
	LEAQ (SI)(R8*1), R10
	VMOVUPS (SI)(R9*1), Y0
	VMOVUPS (R10)(R9*1), Y1
	LEAQ (DI)(R8*1), R11
	VMOVUPS (DI)(R9*1), Y2
	VMOVUPS (R11)(R9*1), Y3
	VMULPS Y2, Y0, Y4
	VMULPS Y3, Y1, Y5
	VSUBPS Y5, Y4, Y4
	VMULPS Y2, Y1, Y6
	VMULPS Y3, Y0, Y7
	VADDPS Y7, Y6, Y6
	VMOVUPS Y4, (SI)(R9*1)
	VMOVUPS Y6, (R10)(R9*1)
	ADDQ $32, R9
	CMPQ R9, R8
	JLT  rt256
	LEAQ (SI)(R8*2), SI
	DECQ CX
	JMP  rt256head
rt256done:
	VZEROUPPER
	RET

// ---- SiLU×mul: out = g / (1 + e^−g) · up ----

// func siluMul512(out, gate, up *float32, n int)
TEXT ·siluMul512(SB), NOSPLIT, $0-32
	MOVQ out+0(FP), DI
	MOVQ gate+8(FP), SI
	MOVQ up+16(FP), DX
	MOVQ n+24(FP), CX
sl512:
	TESTQ CX, CX
	JLE   sl512done
	VMOVUPS (SI), Z8
	VPXORD c_sign<>(SB), Z8, Z0
	EXP512(Z0, Z1, Z2, Z3)
	VADDPS c_one<>(SB), Z0, Z0
	VDIVPS Z0, Z8, Z0
	VMULPS (DX), Z0, Z0
	VMOVUPS Z0, (DI)
	ADDQ $64, SI
	ADDQ $64, DX
	ADDQ $64, DI
	SUBQ $16, CX
	JMP  sl512
sl512done:
	VZEROUPPER
	RET

// func siluMul256(out, gate, up *float32, n int)
TEXT ·siluMul256(SB), NOSPLIT, $0-32
	MOVQ out+0(FP), DI
	MOVQ gate+8(FP), SI
	MOVQ up+16(FP), DX
	MOVQ n+24(FP), CX
sl256:
	TESTQ CX, CX
	JLE   sl256done
	VMOVUPS (SI), Y8
	VXORPS c_sign<>(SB), Y8, Y0
	EXP256(Y0, Y1, Y2, Y3, Y4)
	VADDPS c_one<>(SB), Y0, Y0
	VDIVPS Y0, Y8, Y0
	VMULPS (DX), Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, SI
	ADDQ $32, DX
	ADDQ $32, DI
	SUBQ $8, CX
	JMP  sl256
sl256done:
	VZEROUPPER
	RET

// ---- e^(x−m) with lane sums ----

// func expSum512(acc *[16]float32, dst, src *float32, n int, m float32)
TEXT ·expSum512(SB), NOSPLIT, $0-36
	MOVQ acc+0(FP), R8
	MOVQ dst+8(FP), DI
	MOVQ src+16(FP), SI
	MOVQ n+24(FP), CX
	VBROADCASTSS m+32(FP), Z9
	VMOVUPS (R8), Z10
es512:
	TESTQ CX, CX
	JLE   es512done
	VMOVUPS (SI), Z0
	VSUBPS Z9, Z0, Z0
	EXP512(Z0, Z1, Z2, Z3)
	VMOVUPS Z0, (DI)
	VADDPS Z0, Z10, Z10
	ADDQ $64, SI
	ADDQ $64, DI
	SUBQ $16, CX
	JMP  es512
es512done:
	VMOVUPS Z10, (R8)
	VZEROUPPER
	RET

// func expSum256(acc *[16]float32, dst, src *float32, n int, m float32)
TEXT ·expSum256(SB), NOSPLIT, $0-36
	MOVQ acc+0(FP), R8
	MOVQ dst+8(FP), DI
	MOVQ src+16(FP), SI
	MOVQ n+24(FP), CX
	VBROADCASTSS m+32(FP), Y9
	VMOVUPS (R8), Y10
	VMOVUPS 32(R8), Y11
es256:
	TESTQ CX, CX
	JLE   es256done
	VMOVUPS (SI), Y0
	VSUBPS Y9, Y0, Y0
	EXP256(Y0, Y1, Y2, Y3, Y4)
	VMOVUPS 32(SI), Y5
	VSUBPS Y9, Y5, Y5
	EXP256(Y5, Y1, Y2, Y3, Y4)
	VMOVUPS Y0, (DI)
	VMOVUPS Y5, 32(DI)
	VADDPS Y0, Y10, Y10
	VADDPS Y5, Y11, Y11
	ADDQ $64, SI
	ADDQ $64, DI
	SUBQ $16, CX
	JMP  es256
es256done:
	VMOVUPS Y10, (R8)
	VMOVUPS Y11, 32(R8)
	VZEROUPPER
	RET

// ---- bf16 ----

// func toF32_512(dst *float32, src *uint16, n int)
TEXT ·toF32_512(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
w512:
	TESTQ CX, CX
	JLE   w512done
	VPMOVZXWD (SI), Z0
	VPSLLD $16, Z0, Z0
	VMOVUPS Z0, (DI)
	ADDQ $32, SI
	ADDQ $64, DI
	SUBQ $16, CX
	JMP  w512
w512done:
	VZEROUPPER
	RET

// func toF32_256(dst *float32, src *uint16, n int)
TEXT ·toF32_256(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
w256:
	TESTQ CX, CX
	JLE   w256done
	VPMOVZXWD (SI), Y0
	VPMOVZXWD 16(SI), Y1
	VPSLLD $16, Y0, Y0
	VPSLLD $16, Y1, Y1
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	ADDQ $32, SI
	ADDQ $64, DI
	SUBQ $16, CX
	JMP  w256
w256done:
	VZEROUPPER
	RET

// F32ToBF16 on a register of bits: r ← (b + 0x7fff + (b>>16 & 1)) >> 16, or
// (b>>16) | 0x40 for NaN lanes.

// func toBF16_512(dst *uint16, src *float32, n int)
TEXT ·toBF16_512(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
n512:
	TESTQ CX, CX
	JLE   n512done
	VMOVDQU32 (SI), Z0
	VPSRLD $16, Z0, Z1
	VPANDD c_lsb<>(SB), Z1, Z2
	VPADDD c_rnd<>(SB), Z0, Z3
	VPADDD Z2, Z3, Z3
	VPSRLD $16, Z3, Z3
	VPANDD c_absmask<>(SB), Z0, Z4
	VPCMPGTD c_pinf<>(SB), Z4, K1
	VPORD c_qnan<>(SB), Z1, K1, Z3
	VPMOVDW Z3, Y3
	VMOVDQU Y3, (DI)
	ADDQ $64, SI
	ADDQ $32, DI
	SUBQ $16, CX
	JMP  n512
n512done:
	VZEROUPPER
	RET

// func toBF16_256(dst *uint16, src *float32, n int)
TEXT ·toBF16_256(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
n256:
	TESTQ CX, CX
	JLE   n256done
	VMOVDQU (SI), Y0
	VPSRLD $16, Y0, Y1
	VPAND c_lsb<>(SB), Y1, Y2
	VPADDD c_rnd<>(SB), Y0, Y3
	VPADDD Y2, Y3, Y3
	VPSRLD $16, Y3, Y3
	VPAND c_absmask<>(SB), Y0, Y4
	VPCMPGTD c_pinf<>(SB), Y4, Y4
	VPOR c_qnan<>(SB), Y1, Y5
	VPBLENDVB Y4, Y5, Y3, Y3
	VEXTRACTI128 $1, Y3, X6
	VPACKUSDW X6, X3, X3
	VMOVDQU X3, (DI)
	ADDQ $32, SI
	ADDQ $16, DI
	SUBQ $8, CX
	JMP  n256
n256done:
	VZEROUPPER
	RET

// ---- argmax: max ignoring NaNs, then the first index equal to it ----

// func max512(x *float32, n int) float32
TEXT ·max512(SB), NOSPLIT, $0-20
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), CX
	VBROADCASTSS c_ninf<>(SB), Z0
mx512:
	TESTQ CX, CX
	JLE   mx512done
	VMOVUPS (SI), Z1
	VMAXPS Z0, Z1, Z0        // a NaN in x keeps the running max
	ADDQ $64, SI
	SUBQ $16, CX
	JMP  mx512
mx512done:
	VEXTRACTF32X8 $1, Z0, Y1
	VMAXPS Y1, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VMAXPS X1, X0, X0
	VMOVHLPS X0, X0, X1
	VMAXPS X1, X0, X0
	VMOVSHDUP X0, X1
	VMAXSS X1, X0, X0
	VMOVSS X0, ret+16(FP)
	VZEROUPPER
	RET

// func max256(x *float32, n int) float32
TEXT ·max256(SB), NOSPLIT, $0-20
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), CX
	VBROADCASTSS c_ninf<>(SB), Y0
mx256:
	TESTQ CX, CX
	JLE   mx256done
	VMOVUPS (SI), Y1
	VMAXPS Y0, Y1, Y0
	VMOVUPS 32(SI), Y1
	VMAXPS Y0, Y1, Y0
	ADDQ $64, SI
	SUBQ $16, CX
	JMP  mx256
mx256done:
	VEXTRACTF128 $1, Y0, X1
	VMAXPS X1, X0, X0
	VMOVHLPS X0, X0, X1
	VMAXPS X1, X0, X0
	VMOVSHDUP X0, X1
	VMAXSS X1, X0, X0
	VMOVSS X0, ret+16(FP)
	VZEROUPPER
	RET

// func findEq512(x *float32, n int, v float32) int  (-1 when absent)
TEXT ·findEq512(SB), NOSPLIT, $0-32
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), CX
	VBROADCASTSS v+16(FP), Z1
	XORQ DX, DX
fe512:
	CMPQ DX, CX
	JGE  fe512none
	VCMPPS $0, (SI)(DX*4), Z1, K1
	KMOVW K1, AX
	TESTL AX, AX
	JNZ  fe512hit
	ADDQ $16, DX
	JMP  fe512
fe512hit:
	TZCNTL AX, AX
	ADDQ DX, AX
	MOVQ AX, ret+24(FP)
	VZEROUPPER
	RET
fe512none:
	MOVQ $-1, ret+24(FP)
	VZEROUPPER
	RET

// func findEq256(x *float32, n int, v float32) int
TEXT ·findEq256(SB), NOSPLIT, $0-32
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), CX
	VBROADCASTSS v+16(FP), Y1
	XORQ DX, DX
fe256:
	CMPQ DX, CX
	JGE  fe256none
	VCMPPS $0, (SI)(DX*4), Y1, Y2
	VMOVMSKPS Y2, AX
	TESTL AX, AX
	JNZ  fe256hit
	ADDQ $8, DX
	JMP  fe256
fe256hit:
	TZCNTL AX, AX
	ADDQ DX, AX
	MOVQ AX, ret+24(FP)
	VZEROUPPER
	RET
fe256none:
	MOVQ $-1, ret+24(FP)
	VZEROUPPER
	RET

DATA c_rnd<>+0(SB)/8, $0x00007fff00007fff
DATA c_rnd<>+8(SB)/8, $0x00007fff00007fff
DATA c_rnd<>+16(SB)/8, $0x00007fff00007fff
DATA c_rnd<>+24(SB)/8, $0x00007fff00007fff
DATA c_rnd<>+32(SB)/8, $0x00007fff00007fff
DATA c_rnd<>+40(SB)/8, $0x00007fff00007fff
DATA c_rnd<>+48(SB)/8, $0x00007fff00007fff
DATA c_rnd<>+56(SB)/8, $0x00007fff00007fff
GLOBL c_rnd<>(SB), RODATA|NOPTR, $64
DATA c_lsb<>+0(SB)/8, $0x0000000100000001
DATA c_lsb<>+8(SB)/8, $0x0000000100000001
DATA c_lsb<>+16(SB)/8, $0x0000000100000001
DATA c_lsb<>+24(SB)/8, $0x0000000100000001
DATA c_lsb<>+32(SB)/8, $0x0000000100000001
DATA c_lsb<>+40(SB)/8, $0x0000000100000001
DATA c_lsb<>+48(SB)/8, $0x0000000100000001
DATA c_lsb<>+56(SB)/8, $0x0000000100000001
GLOBL c_lsb<>(SB), RODATA|NOPTR, $64
DATA c_qnan<>+0(SB)/8, $0x0000004000000040
DATA c_qnan<>+8(SB)/8, $0x0000004000000040
DATA c_qnan<>+16(SB)/8, $0x0000004000000040
DATA c_qnan<>+24(SB)/8, $0x0000004000000040
DATA c_qnan<>+32(SB)/8, $0x0000004000000040
DATA c_qnan<>+40(SB)/8, $0x0000004000000040
DATA c_qnan<>+48(SB)/8, $0x0000004000000040
DATA c_qnan<>+56(SB)/8, $0x0000004000000040
GLOBL c_qnan<>(SB), RODATA|NOPTR, $64
DATA c_absmask<>+0(SB)/8, $0x7fffffff7fffffff
DATA c_absmask<>+8(SB)/8, $0x7fffffff7fffffff
DATA c_absmask<>+16(SB)/8, $0x7fffffff7fffffff
DATA c_absmask<>+24(SB)/8, $0x7fffffff7fffffff
DATA c_absmask<>+32(SB)/8, $0x7fffffff7fffffff
DATA c_absmask<>+40(SB)/8, $0x7fffffff7fffffff
DATA c_absmask<>+48(SB)/8, $0x7fffffff7fffffff
DATA c_absmask<>+56(SB)/8, $0x7fffffff7fffffff
GLOBL c_absmask<>(SB), RODATA|NOPTR, $64
DATA c_pinf<>+0(SB)/8, $0x7f8000007f800000
DATA c_pinf<>+8(SB)/8, $0x7f8000007f800000
DATA c_pinf<>+16(SB)/8, $0x7f8000007f800000
DATA c_pinf<>+24(SB)/8, $0x7f8000007f800000
DATA c_pinf<>+32(SB)/8, $0x7f8000007f800000
DATA c_pinf<>+40(SB)/8, $0x7f8000007f800000
DATA c_pinf<>+48(SB)/8, $0x7f8000007f800000
DATA c_pinf<>+56(SB)/8, $0x7f8000007f800000
GLOBL c_pinf<>(SB), RODATA|NOPTR, $64
DATA c_sign<>+0(SB)/8, $0x8000000080000000
DATA c_sign<>+8(SB)/8, $0x8000000080000000
DATA c_sign<>+16(SB)/8, $0x8000000080000000
DATA c_sign<>+24(SB)/8, $0x8000000080000000
DATA c_sign<>+32(SB)/8, $0x8000000080000000
DATA c_sign<>+40(SB)/8, $0x8000000080000000
DATA c_sign<>+48(SB)/8, $0x8000000080000000
DATA c_sign<>+56(SB)/8, $0x8000000080000000
GLOBL c_sign<>(SB), RODATA|NOPTR, $64
