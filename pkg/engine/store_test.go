package engine

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// testClock is a settable clock.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func newTestClock() *testClock { return &testClock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)} }

func (c *testClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

const (
	testTID = "transcript-identity-0123456789ab"
	testKID = "kv-identity-0123456789abcdef0123"
)

func testStore(t testing.TB, dir string, mod func(*storeConfig)) (*store, *bytes.Buffer) {
	t.Helper()
	var logs bytes.Buffer
	c := storeConfig{dir: dir, tid: testTID, kid: testKID, vocab: 97, maxBytes: -1,
		log: slog.New(slog.NewTextHandler(&logs, nil))}
	if mod != nil {
		mod(&c)
	}
	s, err := openStore(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.close)
	return s, &logs
}

func transcriptOf(n int) Transcript {
	return Transcript{Tokens: seqTokens(0, n), Data: []byte(`{"messages":[]}`)}
}

// dirBytes is what the session files in dir take.
func dirBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() && (strings.HasSuffix(path, kvExt) || strings.HasSuffix(path, transcriptExt) || strings.HasSuffix(path, ".json") && !strings.Contains(path, "sessions-")) {
			n += info.Size()
		}
		return nil
	})
	return n
}

func TestStoreEvictsLeastRecentlyUsedBytes(t *testing.T) {
	dir := t.TempDir()
	clock := newTestClock()
	s, logs := testStore(t, dir, func(c *storeConfig) { c.now = clock.now })
	// One session's transcript size, to size the bound: three fit, not four.
	if err := s.saveTranscript("probe", transcriptOf(50)); err != nil {
		t.Fatal(err)
	}
	one := s.stats().bytes
	if _, err := s.remove("probe"); err != nil {
		t.Fatal(err)
	}
	s.maxBytes = 3*one + one/2
	for _, id := range []string{"a", "b", "c"} {
		clock.add(time.Minute)
		if err := s.saveTranscript(id, transcriptOf(50)); err != nil {
			t.Fatal(err)
		}
	}
	clock.add(time.Minute)
	if _, ok := s.transcript("a"); !ok {
		t.Fatal("a not stored")
	}
	// Using a session again (a new turn) makes it the most recent: b is
	// now the least recently used, and goes when d needs room.
	if err := s.saveTranscript("a", transcriptOf(50)); err != nil {
		t.Fatal(err)
	}
	clock.add(time.Minute)
	if err := s.saveTranscript("d", transcriptOf(50)); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, si := range s.list() {
		ids = append(ids, si.ID)
	}
	slices.Sort(ids)
	if !slices.Equal(ids, []string{"a", "c", "d"}) {
		t.Errorf("stored %v, want a c d (b least recently used)", ids)
	}
	if _, err := os.Stat(s.path("b", transcriptExt)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("b's file is still there: %v", err)
	}
	st := s.stats()
	if st.bytes > s.maxBytes || st.bytes != dirBytes(t, dir) || st.evicted != 1 {
		t.Errorf("stats %+v, files %d bytes, bound %d", st, dirBytes(t, dir), s.maxBytes)
	}
	if !strings.Contains(logs.String(), "session=b") {
		t.Errorf("eviction not logged: %s", logs)
	}

	// KV files count too: a's KV evicts the now least recently used c (and
	// d, the sizes being what they are), never a.
	be := newFake(1, 64, 97)
	copy(be.kv[0], seqTokens(0, 40))
	clock.add(time.Minute)
	if err := s.save("a", seqTokens(0, 40), 40, 0, be, clock.now()); err != nil {
		t.Fatal(err)
	}
	if !s.has("a") {
		t.Fatal("a's KV was evicted instead of older sessions")
	}
	if _, ok := s.transcript("c"); ok {
		t.Error("c survived though least recently used")
	}
	if st := s.stats(); st.bytes > s.maxBytes || st.bytes != dirBytes(t, dir) {
		t.Errorf("after KV: %d bytes accounted, %d on disk, bound %d", st.bytes, dirBytes(t, dir), s.maxBytes)
	}
}

func TestStoreTTL(t *testing.T) {
	dir := t.TempDir()
	clock := newTestClock()
	s, _ := testStore(t, dir, func(c *storeConfig) { c.now, c.ttl = clock.now, time.Hour })
	if err := s.saveTranscript("old", transcriptOf(5)); err != nil {
		t.Fatal(err)
	}
	clock.add(50 * time.Minute)
	if err := s.saveTranscript("recent", transcriptOf(5)); err != nil {
		t.Fatal(err)
	}
	clock.add(20 * time.Minute) // old: 70 min idle, recent: 20
	if _, ok := s.transcript("old"); ok {
		t.Error("a session idle beyond the TTL was returned")
	}
	if _, ok := s.transcript("recent"); !ok {
		t.Error("a recent session expired")
	}
	clock.add(45 * time.Minute)
	s.expire()
	if st := s.stats(); st.sessions != 0 || st.expired != 2 || dirBytes(t, dir) != 0 {
		t.Errorf("after the TTL: %+v, %d bytes on disk", st, dirBytes(t, dir))
	}
	// A session evicted from its slot after idling beyond the TTL is not written.
	be := newFake(1, 64, 97)
	copy(be.kv[0], seqTokens(0, 10))
	if err := s.save("idle", seqTokens(0, 10), 10, 0, be, clock.now().Add(-2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if s.has("idle") || dirBytes(t, dir) != 0 {
		t.Error("an expired session's KV was written")
	}
	// Saving expires what is due, without a janitor.
	if err := s.saveTranscript("x", transcriptOf(5)); err != nil {
		t.Fatal(err)
	}
	clock.add(2 * time.Hour)
	if err := s.saveTranscript("y", transcriptOf(5)); err != nil {
		t.Fatal(err)
	}
	if ids := s.list(); len(ids) != 1 || ids[0].ID != "y" {
		t.Errorf("after saving y: %+v", ids)
	}
}

func TestStoreRejectsCorruptOrForeignTranscripts(t *testing.T) {
	dir := t.TempDir()
	s, logs := testStore(t, dir, nil)
	save := func(id string, tr Transcript) string {
		t.Helper()
		if err := s.saveTranscript(id, tr); err != nil {
			t.Fatal(err)
		}
		return s.path(id, transcriptExt)
	}
	want := Transcript{Tokens: []int32{11, 12, 13}, Data: []byte(`{"messages":["hi"]}`)}
	save("ok", want)
	if got, ok := s.transcript("ok"); !ok || !slices.Equal(got.Tokens, want.Tokens) || string(got.Data) != string(want.Data) {
		t.Fatalf("round trip: %+v %v", got, ok)
	}

	edit := func(path, old, new string) {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(b, []byte(old)) {
			t.Fatalf("%s not in %q", old, b)
		}
		if err := os.WriteFile(path, bytes.Replace(b, []byte(old), []byte(new), 1), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name  string
		spoil func(path string)
		log   string
	}{
		{"edited token id", func(p string) { edit(p, "[11,12,13]", "[11,19,13]") }, "checksum"},
		{"truncated", func(p string) {
			b, _ := os.ReadFile(p)
			os.WriteFile(p, b[:len(b)-3], 0o644)
		}, "checksum"},
		{"trailing bytes", func(p string) {
			b, _ := os.ReadFile(p)
			os.WriteFile(p, append(b, 0), 0o644)
		}, "after the transcript"},
		{"another session's file", func(p string) {
			b, _ := os.ReadFile(s.path("ok", transcriptExt))
			os.WriteFile(p, b, 0o644)
		}, `file holds session \"ok\"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			logs.Reset()
			path := save("victim", want)
			c.spoil(path)
			if got, ok := s.transcript("victim"); ok {
				t.Fatalf("spoiled transcript used: %+v", got)
			}
			if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("spoiled file kept: %v", err)
			}
			if l := logs.String(); !strings.Contains(l, "transcript unusable") || !strings.Contains(l, c.log) {
				t.Errorf("log %q, want the reason %q", l, c.log)
			}
			if st := s.stats(); st.bytes != dirBytes(t, dir) {
				t.Errorf("accounted %d bytes, %d on disk", st.bytes, dirBytes(t, dir))
			}
		})
	}

	// Another model's transcript under this model's name (a copied
	// directory, a hash collision): rejected by the identity inside.
	other, _ := testStore(t, t.TempDir(), func(c *storeConfig) { c.tid = "another-model-identity-0123456789" })
	if err := other.saveTranscript("victim", want); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(other.path("victim", transcriptExt))
	save("victim", want)
	os.WriteFile(s.path("victim", transcriptExt), b, 0o644)
	if _, ok := s.transcript("victim"); ok || !strings.Contains(logs.String(), "another model or tokenizer") {
		t.Errorf("another model's transcript: used %v; log %s", ok, logs)
	}
	// Token ids beyond this model's vocabulary, checksum intact.
	save("big", Transcript{Tokens: []int32{5, 500}})
	if _, ok := s.transcript("big"); ok {
		t.Error("token id 500 accepted with a 97-token vocabulary")
	}
}

func TestStoreRestartKeepsTheBound(t *testing.T) {
	dir := t.TempDir()
	clock := newTestClock()
	// What an older version left: evicted first, by age.
	legacy := filepath.Join(dir, "transcripts", "0123456789abcdef0123456789abcdef.json")
	os.MkdirAll(filepath.Dir(legacy), 0o755)
	os.WriteFile(legacy, make([]byte, 3000), 0o644)
	os.Chtimes(legacy, clock.now().Add(-time.Hour), clock.now().Add(-time.Hour))
	// Files that are not a session store's are neither counted nor touched.
	notes := filepath.Join(dir, "notes.txt")
	os.WriteFile(notes, make([]byte, 1<<20), 0o644)
	os.Chtimes(notes, clock.now().Add(-48*time.Hour), clock.now().Add(-48*time.Hour))

	s, _ := testStore(t, dir, func(c *storeConfig) { c.now = clock.now })
	be := newFake(1, 64, 97)
	copy(be.kv[0], seqTokens(0, 30))
	for i := range 6 {
		clock.add(time.Minute)
		if err := s.saveTranscript(sid(i), transcriptOf(30)); err != nil {
			t.Fatal(err)
		}
		if err := s.save(sid(i), seqTokens(0, 30), 30, 0, be, clock.now()); err != nil {
			t.Fatal(err)
		}
	}
	per := (s.stats().bytes - 3000) / 6
	s.close()
	if err := os.WriteFile(filepath.Join(dir, testTID[:16]+"-crashed.kv.tmp123"), []byte("partial"), 0o644); err != nil {
		t.Fatal(err)
	}

	// Restarted with room for three sessions: the three most recent stay.
	bound := 3*per + per/2
	s2, _ := testStore(t, dir, func(c *storeConfig) { c.now, c.maxBytes = clock.now, bound })
	var ids []string
	for _, si := range s2.list() {
		ids = append(ids, si.ID)
	}
	slices.Sort(ids)
	if want := []string{sid(3), sid(4), sid(5)}; !slices.Equal(ids, want) {
		t.Errorf("after restart %v, want %v", ids, want)
	}
	if _, err := os.Stat(legacy); !errors.Is(err, os.ErrNotExist) {
		t.Error("the oldest session file (an older version's) was not evicted first")
	}
	if _, err := os.Stat(notes); err != nil {
		t.Errorf("a file that is not a session's was touched: %v", err)
	}
	if n := dirBytes(t, dir); n > bound || n != s2.stats().bytes {
		t.Errorf("%d bytes on disk, %d accounted, bound %d", n, s2.stats().bytes, bound)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "*.tmp*")); len(m) != 0 {
		t.Errorf("unfinished writes left: %v", m)
	}
	if _, ok := s2.transcript(sid(5)); !ok || !s2.has(sid(5)) {
		t.Error("the most recent session lost its transcript or KV")
	}

	// One store per model and directory: a second is refused, another model's is not.
	if _, err := openStore(storeConfig{dir: dir, tid: testTID, kid: testKID, log: slog.New(slog.DiscardHandler)}); err == nil ||
		!strings.Contains(err.Error(), "in use") {
		t.Errorf("second store on the same model and directory: %v", err)
	}
	testStore(t, dir, func(c *storeConfig) { c.tid = "another-model-identity-0123456789" })
}

func TestStoreDefaultBoundIsAShareOfFreeSpace(t *testing.T) {
	s, _ := testStore(t, t.TempDir(), func(c *storeConfig) { c.maxBytes = 0 })
	if s.maxBytes <= 0 {
		t.Fatalf("default bound %d", s.maxBytes)
	}
}

// FuzzStoreRead feeds arbitrary bytes as a stored KV file and transcript:
// reading must fail cleanly (and drop the file) unless it is valid.
func FuzzStoreRead(f *testing.F) {
	dir := f.TempDir()
	be := newFake(1, 64, 97)
	s, _ := testStore(f, dir, nil)
	copy(be.kv[0], []int32{1, 2, 3})
	if err := s.save("x", []int32{1, 2, 3, 4}, 3, 0, be, time.Time{}); err != nil {
		f.Fatal(err)
	}
	if err := s.saveTranscript("x", Transcript{Tokens: []int32{1, 2, 3, 4}, Data: []byte(`{"a":1}`)}); err != nil {
		f.Fatal(err)
	}
	for _, ext := range []string{kvExt, transcriptExt} {
		valid, err := os.ReadFile(s.path("x", ext))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(valid)
		f.Add(valid[:len(valid)/2])
	}
	f.Add([]byte("ELLMSKV\x01garbage"))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, ext := range []string{kvExt, transcriptExt} {
			if err := os.WriteFile(s.path("x", ext), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		s.mu.Lock()
		s.index["x"] = &storeEntry{TranscriptBytes: int64(len(b)), KVBytes: int64(len(b)), LastUsed: s.now()}
		s.mu.Unlock()
		if tokens, n, err := s.loadKV("x", 0, be, 64); err == nil {
			if n > len(tokens) || len(tokens) > 64 {
				t.Fatalf("accepted %d KV positions for %d tokens", n, len(tokens))
			}
		} else if s.has("x") {
			t.Fatal("unusable KV kept in the store")
		}
		if tr, ok := s.transcript("x"); ok {
			for _, id := range tr.Tokens {
				if id < 0 || id >= 97 {
					t.Fatalf("accepted token id %d", id)
				}
			}
		}
	})
}
