//go:build !purego

package kernels

const assembly = true
