package attn

//go:generate go run gen_tile.go
