// Package cputest builds fake /proc and /sys trees for tests of code that
// reads the machine through a root directory (pkg/cpu, pkg/numa, check-cpu).
package cputest

import (
	"os"
	"path/filepath"
	"testing"
)

// WriteTree writes files (path relative to root → content) under root,
// creating directories, and returns root; root "" is a new temp directory.
func WriteTree(tb testing.TB, root string, files map[string]string) string {
	tb.Helper()
	if root == "" {
		root = tb.TempDir()
	}
	for rel, content := range files {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	return root
}
