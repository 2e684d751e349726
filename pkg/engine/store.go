package engine

import (
	"bufio"
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ellm-dev/ellm/pkg/kvcache"
	"github.com/ellm-dev/ellm/pkg/modelcfg"
)

// store is the one owner of a session directory (--session-store). Per
// session it keeps up to two files: the transcript its client (the server)
// asked to keep, and the KV of the positions a slot had computed when the
// session left it. An index lists them with their sizes and last use, so
// that a restarted engine finds them.
//
// Every file carries the identity it is valid for and a CRC-32C over its
// metadata (the KV payload has kvcache's own CRC), and is discarded with a
// log line when either does not match, never used:
//   - a transcript is token ids: valid for one model config and tokenizer
//     (the transcript identity, which also names the files and the index,
//     so that several models share a directory without seeing each other's
//     sessions);
//   - KV is valid only for the exact weights, dtypes, kernel path and cache
//     layout that computed it (the KV identity).
//
// The directory is bounded: beyond maxBytes, session files are evicted by
// last use (this store's sessions by their index, other models' or older
// versions' session files by modification time; files not named like a
// session store's are never counted or touched), and sessions idle longer
// than ttl are deleted when anything is saved and by the engine's janitor.
//
// All methods are safe for concurrent use; KV files are read and written
// outside the lock (a KV file is replaced by rename, so a reader sees the
// old or the new file).
type store struct {
	dir      string
	tid, kid string // transcript identity, KV identity
	vocab    int    // token ids of a transcript must be below it; 0 = unchecked
	maxBytes int64  // 0 = unbounded
	ttl      time.Duration
	now      func() time.Time
	log      *slog.Logger
	lock     *os.File

	mu      sync.Mutex
	index   map[string]*storeEntry
	foreign map[string]foreignFile // by path: files that are not this store's sessions
	bytes   int64                  // of the entries' files and the foreign files
	evicted int64                  // sessions evicted to keep within maxBytes
	expired int64                  // sessions deleted after ttl
}

type storeEntry struct {
	TranscriptBytes int64     `json:"transcript_bytes,omitempty"`
	KVBytes         int64     `json:"kv_bytes,omitempty"`
	Tokens          int       `json:"tokens"`              // of the transcript
	KV              int       `json:"kv_tokens,omitempty"` // positions in the KV file
	LastUsed        time.Time `json:"last_used"`
}

func (e *storeEntry) bytes() int64 { return e.TranscriptBytes + e.KVBytes }

type foreignFile struct {
	size    int64
	modTime time.Time
}

type storeIndex struct {
	Identity string                 `json:"identity"`
	Sessions map[string]*storeEntry `json:"sessions"`
}

// kvMeta precedes the KV in a KV file.
type kvMeta struct {
	Identity string  `json:"identity"`
	Session  string  `json:"session"`
	Tokens   []int32 `json:"tokens"`
	KV       int     `json:"kv"`
}

// transcriptMeta is a transcript file's content.
type transcriptMeta struct {
	Identity string          `json:"identity"`
	Session  string          `json:"session"`
	Tokens   []int32         `json:"tokens"`
	Data     json.RawMessage `json:"data,omitempty"`
}

var (
	// sessionFile is the name of a session store's file, of any model:
	// model identity, session hash, kind (.session: before transcripts moved here).
	sessionFile = regexp.MustCompile(`^[0-9a-f]{16}-[0-9a-f]{32}\.(kv|transcript|session)$`)
	// legacyTranscript is a transcript the server kept itself, under transcripts/.
	legacyTranscript = regexp.MustCompile(`^[0-9a-f]{32}\.json$`)
	kvMagic          = [8]byte{'E', 'L', 'L', 'M', 'S', 'K', 'V', 1}
	transcriptMagic  = [8]byte{'E', 'L', 'L', 'M', 'S', 'T', 'R', 1}
	castagnoli       = crc32.MakeTable(crc32.Castagnoli)
)

const (
	kvExt         = ".kv"
	transcriptExt = ".transcript"
	// defaultStoreShare of the free space at start-up bounds a store whose
	// limit is not set.
	defaultStoreShare = 10
)

// kvIdentity names what a stored KV depends on.
func kvIdentity(dir string, cfg *modelcfg.Config, info Info) string {
	h := sha256.New()
	ch := kvcache.ConfigHash(cfg)
	h.Write(ch[:])
	fmt.Fprintf(h, "|weights=%s|kv=%s|kernels=%s|attention=%s|seq=%d", info.DType, info.KVDType, info.KernelPath, info.Attention, info.SequenceLength)
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

type storeConfig struct {
	dir      string
	tid, kid string
	vocab    int
	maxBytes int64 // 0 = defaultStoreShare % of the free space; < 0 = unbounded
	ttl      time.Duration
	now      func() time.Time
	log      *slog.Logger
}

// openStore opens dir for the model tid, taking its lock, reading its index
// and sizing everything else in the directory, then applies ttl and the
// byte bound to what an earlier run left.
func openStore(c storeConfig) (*store, error) {
	if err := os.MkdirAll(c.dir, 0o755); err != nil {
		return nil, fmt.Errorf("session store: %w", err)
	}
	if c.now == nil {
		c.now = time.Now
	}
	s := &store{dir: c.dir, tid: c.tid, kid: c.kid, vocab: c.vocab, ttl: c.ttl, now: c.now, log: c.log,
		index: map[string]*storeEntry{}, foreign: map[string]foreignFile{}}
	var err error
	if s.maxBytes, err = dirBound(c.dir, c.maxBytes); err != nil {
		return nil, fmt.Errorf("session store: %w", err)
	}
	lock, err := lockDir(s.lockPath(), "session store")
	if err != nil {
		return nil, err
	}
	s.lock = lock
	if err := s.load(); err != nil {
		s.close()
		return nil, err
	}
	s.mu.Lock()
	s.expireLocked()
	s.enforceLocked()
	err = s.writeIndexLocked()
	s.mu.Unlock()
	if err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

// dirBound resolves a directory's byte bound: set (> 0), the default
// (0: defaultStoreShare % of its file system's free space now) or none
// (< 0, returned as 0).
func dirBound(dir string, maxBytes int64) (int64, error) {
	switch {
	case maxBytes > 0:
		return maxBytes, nil
	case maxBytes < 0:
		return 0, nil
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, fmt.Errorf("free space of %s: %w", dir, err)
	}
	return max(int64(st.Bavail)*int64(st.Bsize)/defaultStoreShare, 1), nil
}

// lockDir takes an exclusive lock on path (created if needed) for as long
// as the returned file is open: one ellm per model and directory.
func lockDir(path, what string) (*os.File, error) {
	lock, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		lock.Close()
		return nil, fmt.Errorf("%s %s is in use by another ellm serving this model: %w", what, filepath.Dir(path), err)
	}
	return lock, nil
}

// load reads the index and accounts for every file in the directory.
func (s *store) load() error {
	b, err := os.ReadFile(s.indexPath())
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return fmt.Errorf("session store: %w", err)
	default:
		var idx storeIndex
		if err := json.Unmarshal(b, &idx); err != nil || idx.Identity != s.tid {
			s.log.Warn("session store: index unreadable, its sessions will be evicted as unknown files", "path", s.indexPath(), "err", err)
		} else {
			for sid, ent := range idx.Sessions {
				if ent != nil {
					s.index[sid] = ent
				}
			}
		}
	}
	own := map[string]string{} // file name → session
	for sid := range s.index {
		own[s.fileName(sid, transcriptExt)] = sid
		own[s.fileName(sid, kvExt)] = sid
	}
	sizes := map[string]int64{}
	account := func(path string, info fs.FileInfo) {
		if _, ok := own[info.Name()]; ok && filepath.Dir(path) == s.dir {
			sizes[info.Name()] = info.Size()
			return
		}
		s.foreign[path] = foreignFile{size: info.Size(), modTime: info.ModTime()}
		s.bytes += info.Size()
	}
	for _, pattern := range []string{"*", filepath.Join("transcripts", "*")} {
		paths, err := filepath.Glob(filepath.Join(s.dir, pattern))
		if err != nil {
			return fmt.Errorf("session store: %w", err)
		}
		for _, path := range paths {
			name := filepath.Base(path)
			if strings.HasPrefix(name, s.tid[:16]+"-") && strings.Contains(name, ".tmp") {
				_ = os.Remove(path) // a write this store did not finish
				continue
			}
			// Only files of a session store's own naming count (and may
			// be evicted): the directory may hold anything else.
			_, mine := own[name]
			if !mine && !sessionFile.MatchString(name) && !(filepath.Base(filepath.Dir(path)) == "transcripts" && legacyTranscript.MatchString(name)) {
				continue
			}
			if info, err := os.Lstat(path); err == nil && info.Mode().IsRegular() {
				account(path, info)
			}
		}
	}
	for sid, ent := range s.index {
		ent.TranscriptBytes = sizes[s.fileName(sid, transcriptExt)]
		ent.KVBytes = sizes[s.fileName(sid, kvExt)]
		if ent.KVBytes == 0 {
			ent.KV = 0
		}
		if ent.bytes() == 0 {
			delete(s.index, sid)
			continue
		}
		s.bytes += ent.bytes()
	}
	return nil
}

func (s *store) close() {
	if s.lock != nil {
		s.lock.Close() // releases the flock
		s.lock = nil
	}
}

func (s *store) indexPath() string { return filepath.Join(s.dir, "sessions-"+s.tid+".json") }
func (s *store) lockPath() string  { return filepath.Join(s.dir, "sessions-"+s.tid+".lock") }

// fileName names a session's file: the model's identity, then a hash of the
// session id (ids are client strings, not file names).
func (s *store) fileName(sid, ext string) string {
	h := sha256.Sum256([]byte(sid))
	return s.tid[:16] + "-" + hex.EncodeToString(h[:16]) + ext
}

func (s *store) path(sid, ext string) string { return filepath.Join(s.dir, s.fileName(sid, ext)) }

// has reports whether the store holds KV for sid.
func (s *store) has(sid string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	ent, ok := s.index[sid]
	return ok && ent.KVBytes > 0
}

// storeStats is the store's part of Stats.
type storeStats struct {
	sessions         int
	bytes, maxBytes  int64
	evicted, expired int64
}

func (s *store) stats() storeStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return storeStats{sessions: len(s.index), bytes: s.bytes, maxBytes: s.maxBytes, evicted: s.evicted, expired: s.expired}
}

// writeFileAtomic writes a store's file through a temporary file beside it
// (named path.tmp…) and a rename, so that readers and a crash see the old
// file or the new one; it returns the file's size.
func writeFileAtomic(path string, write func(w *bufio.Writer) error) (int64, error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
	if err != nil {
		return 0, err
	}
	defer os.Remove(tmp.Name()) // after a successful rename this is a no-op
	w := bufio.NewWriterSize(tmp, 1<<20)
	err = write(w)
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
		return 0, err
	}
	st, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

// writeHeader writes magic, the metadata's length, the metadata and its CRC.
func writeHeader(w io.Writer, magic [8]byte, meta []byte) error {
	var b bytes.Buffer
	b.Write(magic[:])
	binary.Write(&b, binary.LittleEndian, uint32(len(meta)))
	b.Write(meta)
	binary.Write(&b, binary.LittleEndian, crc32.Checksum(meta, castagnoli))
	_, err := w.Write(b.Bytes())
	return err
}

// readHeader reads what writeHeader wrote, checking the magic, the length
// against the file's size and the CRC.
func readHeader(r io.Reader, magic [8]byte, size int64) ([]byte, error) {
	var m [8]byte
	var n, sum uint32
	if _, err := io.ReadFull(r, m[:]); err != nil || m != magic {
		return nil, errors.New("not a session file of this kind")
	}
	if err := binary.Read(r, binary.LittleEndian, &n); err != nil || int64(n) > size {
		return nil, errors.New("bad metadata length")
	}
	meta := make([]byte, n)
	if _, err := io.ReadFull(r, meta); err != nil {
		return nil, fmt.Errorf("metadata: %w", err)
	}
	if err := binary.Read(r, binary.LittleEndian, &sum); err != nil || sum != crc32.Checksum(meta, castagnoli) {
		return nil, errors.New("metadata checksum mismatch: file is corrupt")
	}
	return meta, nil
}

// entryLocked returns sid's entry, creating it.
func (s *store) entryLocked(sid string) *storeEntry {
	ent, ok := s.index[sid]
	if !ok {
		ent = &storeEntry{LastUsed: s.now()}
		s.index[sid] = ent
	}
	return ent
}

// save writes session sid's KV: tokens and the first kv positions of slot.
// lastUsed is when a request last used the session (zero: now). A session
// idle beyond the ttl is not written but deleted.
func (s *store) save(sid string, tokens []int32, kv, slot int, be backend, lastUsed time.Time) error {
	now := s.now()
	if lastUsed.IsZero() || lastUsed.After(now) {
		lastUsed = now
	}
	if s.ttl > 0 && now.Sub(lastUsed) > s.ttl {
		s.mu.Lock()
		defer s.mu.Unlock()
		if _, ok := s.index[sid]; ok {
			s.removeLocked(sid)
			s.expired++
			return s.writeIndexLocked()
		}
		return nil
	}
	meta, err := json.Marshal(kvMeta{Identity: s.kid, Session: sid, Tokens: tokens, KV: kv})
	if err != nil {
		return fmt.Errorf("session store: %w", err)
	}
	size, err := writeFileAtomic(s.path(sid, kvExt), func(w *bufio.Writer) error {
		if err := writeHeader(w, kvMagic, meta); err != nil {
			return err
		}
		return be.exportSlot(w, slot, kv)
	})
	if err != nil {
		return fmt.Errorf("session store: save %s: %w", sid, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ent := s.entryLocked(sid)
	s.bytes += size - ent.KVBytes
	ent.KVBytes, ent.KV = size, kv
	if ent.TranscriptBytes == 0 {
		ent.Tokens = len(tokens)
	}
	ent.LastUsed = later(ent.LastUsed, lastUsed)
	s.expireLocked()
	s.enforceLocked()
	return s.writeIndexLocked()
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// load reads session sid's KV into slot and returns its tokens and KV
// length. KV that cannot be used is deleted (the transcript stays).
func (s *store) loadKV(sid string, slot int, be backend, seqLen int) ([]int32, int, error) {
	tokens, n, err := s.readKV(sid, slot, be, seqLen)
	if err != nil {
		s.mu.Lock()
		s.dropKVLocked(sid)
		if werr := s.writeIndexLocked(); werr != nil {
			s.log.Warn("session store: index", "err", werr)
		}
		s.mu.Unlock()
		return nil, 0, fmt.Errorf("session store: %s: %w", sid, err)
	}
	return tokens, n, nil
}

func (s *store) readKV(sid string, slot int, be backend, seqLen int) ([]int32, int, error) {
	f, err := os.Open(s.path(sid, kvExt))
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, 0, err
	}
	r := bufio.NewReaderSize(f, 1<<20)
	meta, err := readHeader(r, kvMagic, st.Size())
	if err != nil {
		return nil, 0, err
	}
	var m kvMeta
	if err := json.Unmarshal(meta, &m); err != nil {
		return nil, 0, fmt.Errorf("metadata: %w", err)
	}
	switch {
	case m.Identity != s.kid:
		return nil, 0, fmt.Errorf("written for another model or configuration: %w", kvcache.ErrMismatch)
	case m.Session != sid:
		return nil, 0, fmt.Errorf("file holds session %q", m.Session)
	case m.KV < 0 || m.KV > len(m.Tokens) || len(m.Tokens) > seqLen:
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

// saveTranscript keeps t as session sid's transcript and marks it used now.
func (s *store) saveTranscript(sid string, t Transcript) error {
	meta, err := json.Marshal(transcriptMeta{Identity: s.tid, Session: sid, Tokens: t.Tokens, Data: t.Data})
	if err != nil {
		return fmt.Errorf("session store: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	size, err := writeFileAtomic(s.path(sid, transcriptExt), func(w *bufio.Writer) error {
		return writeHeader(w, transcriptMagic, meta)
	})
	if err != nil {
		return fmt.Errorf("session store: save transcript %s: %w", sid, err)
	}
	ent := s.entryLocked(sid)
	s.bytes += size - ent.TranscriptBytes
	ent.TranscriptBytes, ent.Tokens, ent.LastUsed = size, len(t.Tokens), s.now()
	s.expireLocked()
	s.enforceLocked()
	return s.writeIndexLocked()
}

// transcript returns session sid's transcript. One that is corrupt, of
// another model or tokenizer, or names another session is deleted with a
// log line and never returned.
func (s *store) transcript(sid string) (Transcript, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ent, ok := s.index[sid]
	if !ok || ent.TranscriptBytes == 0 {
		return Transcript{}, false
	}
	if s.ttl > 0 && s.now().Sub(ent.LastUsed) > s.ttl {
		s.removeLocked(sid)
		s.expired++
		s.writeIndexWarnLocked()
		return Transcript{}, false
	}
	t, err := s.readTranscript(sid)
	if err != nil {
		s.log.Warn("session store: transcript unusable, discarded", "session", sid, "err", err)
		s.bytes -= ent.TranscriptBytes
		ent.TranscriptBytes, ent.Tokens = 0, ent.KV
		_ = os.Remove(s.path(sid, transcriptExt))
		if ent.bytes() == 0 {
			delete(s.index, sid)
		}
		s.writeIndexWarnLocked()
		return Transcript{}, false
	}
	return t, true
}

func (s *store) readTranscript(sid string) (Transcript, error) {
	b, err := os.ReadFile(s.path(sid, transcriptExt))
	if err != nil {
		return Transcript{}, err
	}
	meta, err := readHeader(bytes.NewReader(b), transcriptMagic, int64(len(b)))
	if err != nil {
		return Transcript{}, err
	}
	if n := len(transcriptMagic) + 4 + len(meta) + 4; n != len(b) {
		return Transcript{}, fmt.Errorf("%d bytes after the transcript", len(b)-n)
	}
	var m transcriptMeta
	if err := json.Unmarshal(meta, &m); err != nil {
		return Transcript{}, fmt.Errorf("metadata: %w", err)
	}
	switch {
	case m.Identity != s.tid:
		return Transcript{}, errors.New("written for another model or tokenizer")
	case m.Session != sid:
		return Transcript{}, fmt.Errorf("file holds session %q", m.Session)
	}
	for i, id := range m.Tokens {
		if id < 0 || (s.vocab > 0 && int(id) >= s.vocab) {
			return Transcript{}, fmt.Errorf("token %d is id %d, outside the vocabulary", i, id)
		}
	}
	return Transcript{Tokens: m.Tokens, Data: m.Data}, nil
}

// remove deletes session sid's files; it reports whether there were any.
func (s *store) remove(sid string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.index[sid]; !ok {
		return false, nil
	}
	s.removeLocked(sid)
	return true, s.writeIndexLocked()
}

func (s *store) removeLocked(sid string) {
	ent, ok := s.index[sid]
	if !ok {
		return
	}
	delete(s.index, sid)
	s.bytes -= ent.bytes()
	_ = os.Remove(s.path(sid, transcriptExt))
	_ = os.Remove(s.path(sid, kvExt))
}

func (s *store) dropKVLocked(sid string) {
	ent, ok := s.index[sid]
	if !ok {
		return
	}
	_ = os.Remove(s.path(sid, kvExt))
	s.bytes -= ent.KVBytes
	ent.KVBytes, ent.KV = 0, 0
	if ent.bytes() == 0 {
		delete(s.index, sid)
	}
}

// expire deletes the sessions idle beyond the ttl.
func (s *store) expire() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.expireLocked() > 0 {
		s.writeIndexWarnLocked()
	}
}

func (s *store) expireLocked() int {
	if s.ttl <= 0 {
		return 0
	}
	n, now := 0, s.now()
	for sid, ent := range s.index {
		if now.Sub(ent.LastUsed) > s.ttl {
			s.removeLocked(sid)
			n++
		}
	}
	s.expired += int64(n)
	return n
}

// enforceLocked evicts the least recently used files until the directory
// is within maxBytes: this store's sessions by last use, other files by
// modification time.
func (s *store) enforceLocked() {
	if s.maxBytes <= 0 || s.bytes <= s.maxBytes {
		return
	}
	type victim struct {
		sid, path string
		used      time.Time
	}
	var vs []victim
	for sid, ent := range s.index {
		vs = append(vs, victim{sid: sid, used: ent.LastUsed})
	}
	for path, f := range s.foreign {
		vs = append(vs, victim{path: path, used: f.modTime})
	}
	slices.SortFunc(vs, func(a, b victim) int {
		return cmp.Or(a.used.Compare(b.used), strings.Compare(a.sid+a.path, b.sid+b.path))
	})
	for _, v := range vs {
		if s.bytes <= s.maxBytes {
			break
		}
		if v.path != "" {
			if err := os.Remove(v.path); err != nil && !errors.Is(err, os.ErrNotExist) {
				s.log.Warn("session store: cannot evict", "path", v.path, "err", err)
				continue
			}
			s.bytes -= s.foreign[v.path].size
			delete(s.foreign, v.path)
			continue
		}
		s.log.Info("session store: evicting the least recently used session", "session", v.sid,
			"last_used", v.used.Format(time.RFC3339), "store_bytes", s.bytes, "max_bytes", s.maxBytes)
		s.removeLocked(v.sid)
		s.evicted++
	}
}

// list returns the stored sessions.
func (s *store) list() []SessionInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]SessionInfo, 0, len(s.index))
	for sid, ent := range s.index {
		out = append(out, SessionInfo{ID: sid, Tokens: ent.Tokens, KVTokens: ent.KV, Bytes: ent.bytes(), LastUsed: ent.LastUsed})
	}
	return out
}

func (s *store) writeIndexWarnLocked() {
	if err := s.writeIndexLocked(); err != nil {
		s.log.Warn("session store: index", "err", err)
	}
}

func (s *store) writeIndexLocked() error {
	b, err := json.MarshalIndent(storeIndex{Identity: s.tid, Sessions: s.index}, "", "  ")
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
