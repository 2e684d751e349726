// Package hfdir reads the files of a Hugging Face model directory.
//
// Model directories are often Git checkouts, and a checkout made without
// symlink support (core.symlinks=false: Windows, some archives and CI caches)
// stores each symlink as a small text file holding the link's target.
// Hugging Face tooling follows symlinks, so ellm follows these link files too:
// otherwise a model whose tokenizer.json "is" ../tokenizer/tokenizer.json
// would fail to load with a JSON syntax error.
package hfdir

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
)

// maxLinkFile bounds what can be a link file: a path, not a JSON document.
const maxLinkFile = 1024

// maxHops bounds chains of link files (and loops).
const maxHops = 8

// ReadFile reads name in dir, following link files. Errors wrap the
// underlying one, so errors.Is(err, fs.ErrNotExist) works.
func ReadFile(dir, name string) ([]byte, error) {
	path := filepath.Join(dir, name)
	for range maxHops {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		target, ok := linkTarget(b)
		if !ok {
			return b, nil
		}
		next := filepath.Join(filepath.Dir(path), target)
		if st, err := os.Stat(next); err != nil || !st.Mode().IsRegular() {
			return b, nil // text that merely looks like a path: let the parser judge it
		}
		path = next
	}
	return nil, fmt.Errorf("%s: more than %d link files in a row", filepath.Join(dir, name), maxHops)
}

// linkTarget reports whether b is a link file: one relative path on one line.
func linkTarget(b []byte) (string, bool) {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || len(b) > maxLinkFile || bytes.ContainsAny(b, "\n\r\x00{}[]\"") {
		return "", false
	}
	s := string(b)
	if filepath.IsAbs(s) {
		return "", false
	}
	return s, true
}
