//go:build !amd64 || purego

package kernels

// assembly: this build has no assembly kernels, so every path runs the
// pure-Go ones.
const assembly = false
