// Package sharedtest locates the read-only data set that lives beside the
// repository (../shared: real Qwen3 tokenizer and templates, small models,
// alignment references) for tests.
package sharedtest

import (
	"os"
	"path/filepath"
	"testing"
)

// EnvVar overrides where the shared data set is.
const EnvVar = "ELLM_SHARED"

// Root returns the shared data directory: $ELLM_SHARED, else ../shared beside
// the module root. It returns "" when neither exists.
func Root() string {
	if d := os.Getenv(EnvVar); d != "" {
		return d
	}
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			shared := filepath.Join(filepath.Dir(dir), "shared")
			if _, err := os.Stat(shared); err == nil {
				return shared
			}
			return ""
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// Path returns root/elem... for a test. When the data is missing the test
// fails under CI (CI is set) and is skipped elsewhere, so a CI machine
// without the data set can never pass by skipping.
func Path(tb testing.TB, elem ...string) string {
	tb.Helper()
	root := Root()
	p := filepath.Join(append([]string{root}, elem...)...)
	if root != "" {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	msg := "shared data " + filepath.Join(elem...) + " not found (set " + EnvVar + " or place the data set at ../shared)"
	if os.Getenv("CI") != "" {
		tb.Fatal(msg)
	}
	tb.Skip(msg)
	return ""
}
