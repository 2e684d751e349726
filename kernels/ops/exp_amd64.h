// Exp32 (kernels/ops) on registers, shared by every assembly file that needs
// e^x bit-identical to ops.Exp32: kernels/ops and kernels/attn include it.
// Each including file gets its own copy of the read-only constants below
// (the polynomial's, and -inf for softmax maxima).

// Exp32 on a register: x ← e^x; n, t, u (and k / K2) are scratch.
#define EXP512(x, n, t, u) \
	VCMPPS $13, c_lo<>(SB), x, K2 \
	VMAXPS c_lo<>(SB), x, x \
	VMINPS c_hi<>(SB), x, x \
	VMULPS c_log2e<>(SB), x, n \
	VRNDSCALEPS $0, n, n \
	VMULPS c_ln2hi<>(SB), n, t \
	VSUBPS t, x, x \
	VMULPS c_ln2lo<>(SB), n, t \
	VSUBPS t, x, x \
	VMULPS c_p0<>(SB), x, t \
	VADDPS c_p1<>(SB), t, t \
	VMULPS x, t, t \
	VADDPS c_p2<>(SB), t, t \
	VMULPS x, t, t \
	VADDPS c_p3<>(SB), t, t \
	VMULPS x, t, t \
	VADDPS c_p4<>(SB), t, t \
	VMULPS x, t, t \
	VADDPS c_p5<>(SB), t, t \
	VCVTPS2DQ n, n \
	VPSLLD $23, n, n \
	VPADDD c_bias<>(SB), n, n \
	VMULPS x, x, u \
	VMULPS u, t, t \
	VADDPS x, t, t \
	VADDPS c_one<>(SB), t, t \
	VMULPS n, t, x \
	VMOVAPS.Z x, K2, x

#define EXP256(x, n, t, u, k) \
	VCMPPS $13, c_lo<>(SB), x, k \
	VMAXPS c_lo<>(SB), x, x \
	VMINPS c_hi<>(SB), x, x \
	VMULPS c_log2e<>(SB), x, n \
	VROUNDPS $0, n, n \
	VMULPS c_ln2hi<>(SB), n, t \
	VSUBPS t, x, x \
	VMULPS c_ln2lo<>(SB), n, t \
	VSUBPS t, x, x \
	VMULPS c_p0<>(SB), x, t \
	VADDPS c_p1<>(SB), t, t \
	VMULPS x, t, t \
	VADDPS c_p2<>(SB), t, t \
	VMULPS x, t, t \
	VADDPS c_p3<>(SB), t, t \
	VMULPS x, t, t \
	VADDPS c_p4<>(SB), t, t \
	VMULPS x, t, t \
	VADDPS c_p5<>(SB), t, t \
	VCVTPS2DQ n, n \
	VPSLLD $23, n, n \
	VPADDD c_bias<>(SB), n, n \
	VMULPS x, x, u \
	VMULPS u, t, t \
	VADDPS x, t, t \
	VADDPS c_one<>(SB), t, t \
	VMULPS n, t, x \
	VANDPS k, x, x

DATA c_lo<>+0(SB)/8, $0xc2ae0000c2ae0000
DATA c_lo<>+8(SB)/8, $0xc2ae0000c2ae0000
DATA c_lo<>+16(SB)/8, $0xc2ae0000c2ae0000
DATA c_lo<>+24(SB)/8, $0xc2ae0000c2ae0000
DATA c_lo<>+32(SB)/8, $0xc2ae0000c2ae0000
DATA c_lo<>+40(SB)/8, $0xc2ae0000c2ae0000
DATA c_lo<>+48(SB)/8, $0xc2ae0000c2ae0000
DATA c_lo<>+56(SB)/8, $0xc2ae0000c2ae0000
GLOBL c_lo<>(SB), RODATA|NOPTR, $64
DATA c_hi<>+0(SB)/8, $0x42b0000042b00000
DATA c_hi<>+8(SB)/8, $0x42b0000042b00000
DATA c_hi<>+16(SB)/8, $0x42b0000042b00000
DATA c_hi<>+24(SB)/8, $0x42b0000042b00000
DATA c_hi<>+32(SB)/8, $0x42b0000042b00000
DATA c_hi<>+40(SB)/8, $0x42b0000042b00000
DATA c_hi<>+48(SB)/8, $0x42b0000042b00000
DATA c_hi<>+56(SB)/8, $0x42b0000042b00000
GLOBL c_hi<>(SB), RODATA|NOPTR, $64
DATA c_log2e<>+0(SB)/8, $0x3fb8aa3b3fb8aa3b
DATA c_log2e<>+8(SB)/8, $0x3fb8aa3b3fb8aa3b
DATA c_log2e<>+16(SB)/8, $0x3fb8aa3b3fb8aa3b
DATA c_log2e<>+24(SB)/8, $0x3fb8aa3b3fb8aa3b
DATA c_log2e<>+32(SB)/8, $0x3fb8aa3b3fb8aa3b
DATA c_log2e<>+40(SB)/8, $0x3fb8aa3b3fb8aa3b
DATA c_log2e<>+48(SB)/8, $0x3fb8aa3b3fb8aa3b
DATA c_log2e<>+56(SB)/8, $0x3fb8aa3b3fb8aa3b
GLOBL c_log2e<>(SB), RODATA|NOPTR, $64
DATA c_ln2hi<>+0(SB)/8, $0x3f3180003f318000
DATA c_ln2hi<>+8(SB)/8, $0x3f3180003f318000
DATA c_ln2hi<>+16(SB)/8, $0x3f3180003f318000
DATA c_ln2hi<>+24(SB)/8, $0x3f3180003f318000
DATA c_ln2hi<>+32(SB)/8, $0x3f3180003f318000
DATA c_ln2hi<>+40(SB)/8, $0x3f3180003f318000
DATA c_ln2hi<>+48(SB)/8, $0x3f3180003f318000
DATA c_ln2hi<>+56(SB)/8, $0x3f3180003f318000
GLOBL c_ln2hi<>(SB), RODATA|NOPTR, $64
DATA c_ln2lo<>+0(SB)/8, $0xb95e8083b95e8083
DATA c_ln2lo<>+8(SB)/8, $0xb95e8083b95e8083
DATA c_ln2lo<>+16(SB)/8, $0xb95e8083b95e8083
DATA c_ln2lo<>+24(SB)/8, $0xb95e8083b95e8083
DATA c_ln2lo<>+32(SB)/8, $0xb95e8083b95e8083
DATA c_ln2lo<>+40(SB)/8, $0xb95e8083b95e8083
DATA c_ln2lo<>+48(SB)/8, $0xb95e8083b95e8083
DATA c_ln2lo<>+56(SB)/8, $0xb95e8083b95e8083
GLOBL c_ln2lo<>(SB), RODATA|NOPTR, $64
DATA c_p0<>+0(SB)/8, $0x3950696739506967
DATA c_p0<>+8(SB)/8, $0x3950696739506967
DATA c_p0<>+16(SB)/8, $0x3950696739506967
DATA c_p0<>+24(SB)/8, $0x3950696739506967
DATA c_p0<>+32(SB)/8, $0x3950696739506967
DATA c_p0<>+40(SB)/8, $0x3950696739506967
DATA c_p0<>+48(SB)/8, $0x3950696739506967
DATA c_p0<>+56(SB)/8, $0x3950696739506967
GLOBL c_p0<>(SB), RODATA|NOPTR, $64
DATA c_p1<>+0(SB)/8, $0x3ab743ce3ab743ce
DATA c_p1<>+8(SB)/8, $0x3ab743ce3ab743ce
DATA c_p1<>+16(SB)/8, $0x3ab743ce3ab743ce
DATA c_p1<>+24(SB)/8, $0x3ab743ce3ab743ce
DATA c_p1<>+32(SB)/8, $0x3ab743ce3ab743ce
DATA c_p1<>+40(SB)/8, $0x3ab743ce3ab743ce
DATA c_p1<>+48(SB)/8, $0x3ab743ce3ab743ce
DATA c_p1<>+56(SB)/8, $0x3ab743ce3ab743ce
GLOBL c_p1<>(SB), RODATA|NOPTR, $64
DATA c_p2<>+0(SB)/8, $0x3c0889083c088908
DATA c_p2<>+8(SB)/8, $0x3c0889083c088908
DATA c_p2<>+16(SB)/8, $0x3c0889083c088908
DATA c_p2<>+24(SB)/8, $0x3c0889083c088908
DATA c_p2<>+32(SB)/8, $0x3c0889083c088908
DATA c_p2<>+40(SB)/8, $0x3c0889083c088908
DATA c_p2<>+48(SB)/8, $0x3c0889083c088908
DATA c_p2<>+56(SB)/8, $0x3c0889083c088908
GLOBL c_p2<>(SB), RODATA|NOPTR, $64
DATA c_p3<>+0(SB)/8, $0x3d2aa9c13d2aa9c1
DATA c_p3<>+8(SB)/8, $0x3d2aa9c13d2aa9c1
DATA c_p3<>+16(SB)/8, $0x3d2aa9c13d2aa9c1
DATA c_p3<>+24(SB)/8, $0x3d2aa9c13d2aa9c1
DATA c_p3<>+32(SB)/8, $0x3d2aa9c13d2aa9c1
DATA c_p3<>+40(SB)/8, $0x3d2aa9c13d2aa9c1
DATA c_p3<>+48(SB)/8, $0x3d2aa9c13d2aa9c1
DATA c_p3<>+56(SB)/8, $0x3d2aa9c13d2aa9c1
GLOBL c_p3<>(SB), RODATA|NOPTR, $64
DATA c_p4<>+0(SB)/8, $0x3e2aaaaa3e2aaaaa
DATA c_p4<>+8(SB)/8, $0x3e2aaaaa3e2aaaaa
DATA c_p4<>+16(SB)/8, $0x3e2aaaaa3e2aaaaa
DATA c_p4<>+24(SB)/8, $0x3e2aaaaa3e2aaaaa
DATA c_p4<>+32(SB)/8, $0x3e2aaaaa3e2aaaaa
DATA c_p4<>+40(SB)/8, $0x3e2aaaaa3e2aaaaa
DATA c_p4<>+48(SB)/8, $0x3e2aaaaa3e2aaaaa
DATA c_p4<>+56(SB)/8, $0x3e2aaaaa3e2aaaaa
GLOBL c_p4<>(SB), RODATA|NOPTR, $64
DATA c_p5<>+0(SB)/8, $0x3f0000003f000000
DATA c_p5<>+8(SB)/8, $0x3f0000003f000000
DATA c_p5<>+16(SB)/8, $0x3f0000003f000000
DATA c_p5<>+24(SB)/8, $0x3f0000003f000000
DATA c_p5<>+32(SB)/8, $0x3f0000003f000000
DATA c_p5<>+40(SB)/8, $0x3f0000003f000000
DATA c_p5<>+48(SB)/8, $0x3f0000003f000000
DATA c_p5<>+56(SB)/8, $0x3f0000003f000000
GLOBL c_p5<>(SB), RODATA|NOPTR, $64
DATA c_one<>+0(SB)/8, $0x3f8000003f800000
DATA c_one<>+8(SB)/8, $0x3f8000003f800000
DATA c_one<>+16(SB)/8, $0x3f8000003f800000
DATA c_one<>+24(SB)/8, $0x3f8000003f800000
DATA c_one<>+32(SB)/8, $0x3f8000003f800000
DATA c_one<>+40(SB)/8, $0x3f8000003f800000
DATA c_one<>+48(SB)/8, $0x3f8000003f800000
DATA c_one<>+56(SB)/8, $0x3f8000003f800000
GLOBL c_one<>(SB), RODATA|NOPTR, $64
DATA c_bias<>+0(SB)/8, $0x3f8000003f800000
DATA c_bias<>+8(SB)/8, $0x3f8000003f800000
DATA c_bias<>+16(SB)/8, $0x3f8000003f800000
DATA c_bias<>+24(SB)/8, $0x3f8000003f800000
DATA c_bias<>+32(SB)/8, $0x3f8000003f800000
DATA c_bias<>+40(SB)/8, $0x3f8000003f800000
DATA c_bias<>+48(SB)/8, $0x3f8000003f800000
DATA c_bias<>+56(SB)/8, $0x3f8000003f800000
GLOBL c_bias<>(SB), RODATA|NOPTR, $64

// -inf in every lane: the starting running maximum of a softmax.
DATA c_ninf<>+0(SB)/8, $0xff800000ff800000
DATA c_ninf<>+8(SB)/8, $0xff800000ff800000
DATA c_ninf<>+16(SB)/8, $0xff800000ff800000
DATA c_ninf<>+24(SB)/8, $0xff800000ff800000
DATA c_ninf<>+32(SB)/8, $0xff800000ff800000
DATA c_ninf<>+40(SB)/8, $0xff800000ff800000
DATA c_ninf<>+48(SB)/8, $0xff800000ff800000
DATA c_ninf<>+56(SB)/8, $0xff800000ff800000
GLOBL c_ninf<>(SB), RODATA|NOPTR, $64
