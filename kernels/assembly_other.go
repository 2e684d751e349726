//go:build (!amd64 && !arm64) || purego

package kernels

// assembly: this build has no assembly kernels (an architecture other than
// amd64 and arm64, or -tags purego), so every path runs the pure-Go ones.
const assembly = false
