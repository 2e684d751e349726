//go:build !linux || !amd64

package kernels

// requestAMX: the AMX kernels run on Linux only.
func requestAMX() bool { return false }
