package attn

// exp_amd64.h is this package's copy of the one EXP512 definition;
// gen_tile.go writes the group tile kernels, which use it.
//go:generate go run ../internal/asmgen exp_amd64.h
//go:generate go run gen_tile.go
