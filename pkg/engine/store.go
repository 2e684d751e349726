package engine

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/ellm-dev/ellm/pkg/kvcache"
	"github.com/ellm-dev/ellm/pkg/modelcfg"
)

// store keeps evicted sessions on disk: per session one file holding its
// transcript and the KV of its computed positions (kvcache's export format),
// plus an index so that a restarted engine finds them.
//
// KV is only meaningful for the exact weights, weight dtype, kernel path and
// cache layout that computed it, so all of these form the store identity:
// files and index carry it, and a session written under another identity is
// never restored (it is recomputed). Several models can share one directory.
type store struct {
	dir   string
	id    string // identity of model, weights, kernels and cache layout
	log   *slog.Logger
	index map[string]storeEntry
}

type storeEntry struct {
	File   string    `json:"file"`
	Tokens int       `json:"tokens"`
	KV     int       `json:"kv"`
	Bytes  int64     `json:"bytes"`
	Saved  time.Time `json:"saved"`
}

type storeIndex struct {
	Identity string                `json:"identity"`
	Sessions map[string]storeEntry `json:"sessions"`
}

// sessionMeta precedes the KV in a session file.
type sessionMeta struct {
	Identity string  `json:"identity"`
	Session  string  `json:"session"`
	Tokens   []int32 `json:"tokens"`
	KV       int     `json:"kv"`
}

var sessionMagic = [8]byte{'E', 'L', 'L', 'M', 'S', 'E', 'S', 1}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// storeIdentity names what a stored KV depends on.
func storeIdentity(dir string, cfg *modelcfg.Config, info Info) string {
	h := sha256.New()
	ch := kvcache.ConfigHash(cfg)
	h.Write(ch[:])
	fmt.Fprintf(h, "|weights=%s|kv=%s|kernels=%s|seq=%d", info.DType, info.KVDType, info.KernelPath, info.SequenceLength)
	// The weights themselves: a checkpoint replaced in place changes size or mtime.
	files, _ := filepath.Glob(filepath.Join(dir, "*.safetensors"))
	sort.Strings(files)
	for _, f := range files {
		if st, err := os.Stat(f); err == nil {
			fmt.Fprintf(h, "|%s:%d:%d", filepath.Base(f), st.Size(), st.ModTime().UnixNano())
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:32]
}

func openStore(dir, id string, log *slog.Logger) (*store, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("session store: %w", err)
	}
	s := &store{dir: dir, id: id, log: log, index: map[string]storeEntry{}}
	b, err := os.ReadFile(s.indexPath())
	switch {
	case errors.Is(err, os.ErrNotExist):
		return s, nil
	case err != nil:
		return nil, fmt.Errorf("session store: %w", err)
	}
	var idx storeIndex
	if err := json.Unmarshal(b, &idx); err != nil || idx.Identity != id {
		log.Warn("session store: index unreadable, starting empty", "path", s.indexPath(), "err", err)
		return s, nil
	}
	for sid, ent := range idx.Sessions {
		if _, err := os.Stat(filepath.Join(dir, ent.File)); err == nil {
			s.index[sid] = ent
		}
	}
	return s, nil
}

func (s *store) indexPath() string { return filepath.Join(s.dir, "index-"+s.id+".json") }

func (s *store) has(sid string) bool { _, ok := s.index[sid]; return ok }

func (s *store) size() (int, int64) {
	var b int64
	for _, ent := range s.index {
		b += ent.Bytes
	}
	return len(s.index), b
}

func (s *store) fileName(sid string) string {
	h := sha256.Sum256([]byte(sid))
	return s.id[:16] + "-" + hex.EncodeToString(h[:16]) + ".session"
}

// save writes session sid: tokens and the first kv positions of slot.
func (s *store) save(sid string, tokens []int32, kv, slot int, be backend) error {
	name := s.fileName(sid)
	path := filepath.Join(s.dir, name)
	tmp, err := os.CreateTemp(s.dir, name+".tmp*")
	if err != nil {
		return fmt.Errorf("session store: %w", err)
	}
	defer os.Remove(tmp.Name()) // after a successful rename this is a no-op
	w := bufio.NewWriterSize(tmp, 1<<20)
	meta, err := json.Marshal(sessionMeta{Identity: s.id, Session: sid, Tokens: tokens, KV: kv})
	if err != nil {
		tmp.Close()
		return fmt.Errorf("session store: %w", err)
	}
	w.Write(sessionMagic[:])
	binary.Write(w, binary.LittleEndian, uint32(len(meta)))
	w.Write(meta)
	binary.Write(w, binary.LittleEndian, crc32.Checksum(meta, castagnoli))
	err = be.exportSlot(w, slot, kv)
	if err == nil {
		err = w.Flush()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("session store: save %s: %w", sid, err)
	}
	st, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("session store: %w", err)
	}
	s.index[sid] = storeEntry{File: name, Tokens: len(tokens), KV: kv, Bytes: st.Size(), Saved: time.Now()}
	return s.writeIndex()
}

// load reads session sid into slot and returns its tokens and KV length.
// A session that cannot be used is removed from the store.
func (s *store) load(sid string, slot int, be backend, seqLen int) ([]int32, int, error) {
	tokens, n, err := s.read(sid, slot, be, seqLen)
	if err != nil {
		s.remove(sid)
		return nil, 0, fmt.Errorf("session store: %s: %w", sid, err)
	}
	return tokens, n, nil
}

func (s *store) read(sid string, slot int, be backend, seqLen int) ([]int32, int, error) {
	ent := s.index[sid]
	f, err := os.Open(filepath.Join(s.dir, ent.File))
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<20)
	var magic [8]byte
	var n uint32
	if _, err := io.ReadFull(r, magic[:]); err != nil || magic != sessionMagic {
		return nil, 0, errors.New("not a session file")
	}
	st, err := f.Stat()
	if err != nil {
		return nil, 0, err
	}
	if err := binary.Read(r, binary.LittleEndian, &n); err != nil || int64(n) > st.Size() {
		return nil, 0, errors.New("bad metadata length")
	}
	meta := make([]byte, n)
	var sum uint32
	if _, err := io.ReadFull(r, meta); err != nil {
		return nil, 0, fmt.Errorf("metadata: %w", err)
	}
	if err := binary.Read(r, binary.LittleEndian, &sum); err != nil || sum != crc32.Checksum(meta, castagnoli) {
		return nil, 0, errors.New("metadata checksum mismatch: file is corrupt")
	}
	var m sessionMeta
	if err := json.Unmarshal(meta, &m); err != nil {
		return nil, 0, fmt.Errorf("metadata: %w", err)
	}
	switch {
	case m.Identity != s.id:
		return nil, 0, fmt.Errorf("written for another model or configuration: %w", kvcache.ErrMismatch)
	case m.Session != sid:
		return nil, 0, fmt.Errorf("file holds session %q", m.Session)
	case m.KV > len(m.Tokens) || len(m.Tokens) > seqLen:
		return nil, 0, fmt.Errorf("%d KV positions for %d tokens, slots hold %d: %w", m.KV, len(m.Tokens), seqLen, kvcache.ErrMismatch)
	}
	kv, err := be.importSlot(r, slot)
	if err != nil {
		return nil, 0, err
	}
	if kv != m.KV {
		return nil, 0, fmt.Errorf("%d KV positions, metadata says %d", kv, m.KV)
	}
	return m.Tokens, kv, nil
}

func (s *store) remove(sid string) {
	ent, ok := s.index[sid]
	if !ok {
		return
	}
	delete(s.index, sid)
	_ = os.Remove(filepath.Join(s.dir, ent.File))
	if err := s.writeIndex(); err != nil {
		s.log.Warn("session store: index", "err", err)
	}
}

func (s *store) writeIndex() error {
	b, err := json.MarshalIndent(storeIndex{Identity: s.id, Sessions: s.index}, "", "  ")
	if err != nil {
		return fmt.Errorf("session store index: %w", err)
	}
	tmp := s.indexPath() + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return fmt.Errorf("session store index: %w", err)
	}
	if err := os.Rename(tmp, s.indexPath()); err != nil {
		return fmt.Errorf("session store index: %w", err)
	}
	return nil
}
