package attn

// exp_amd64.h is this package's copy of the one EXP512 definition and
// bf16_amd64.h of the VDPBF16PS_Z macro; gen_tile.go writes the group tile
// kernels, which use them.
//go:generate go run ../internal/asmgen exp_amd64.h bf16_amd64.h
//go:generate go run gen_tile.go
