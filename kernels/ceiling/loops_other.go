//go:build !amd64 || purego

package ceiling

// Without assembly there are no instruction ceilings to measure, and the
// bandwidth reader is plain Go.
func loops() loopSet { return loopSet{} }

func readSum(b []byte) uint64 { return readSumGo(b) }
