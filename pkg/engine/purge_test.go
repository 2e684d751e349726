package engine

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// purgeScenario runs, on one slot with blocks of 16 positions, sessions A
// and B that share a 32-token system prompt (2 blocks), a request without
// a session that shares it too, and an unrelated request: each request's
// content goes to the prefix store when the next replaces it, so the
// store holds the system blocks (produced by A, B and the anonymous
// request), 4 blocks each of A and B alone (85 positions: held) and 3 of the
// anonymous request.
func purgeScenario(t *testing.T, e *Engine) (a, b Result) {
	t.Helper()
	system := seqTokens(3, 32)
	turn := func(sid string, rest []int32) Result {
		_, r := collect(t, e, Request{Tokens: append(slices.Clone(system), rest...), MaxTokens: 4, SessionID: sid, StopTokens: []int32{}})
		return r
	}
	a, b = turn("A", seqTokens(40, 50)), turn("B", seqTokens(60, 50))
	turn("", seqTokens(80, 30))
	collect(t, e, Request{Tokens: seqTokens(7, 50), MaxTokens: 4})
	return a, b
}

// matchStored is the prefix of prompt the prefix store holds.
func matchStored(t *testing.T, e *Engine, prompt []int32) int {
	t.Helper()
	n := 0
	if err := e.do(func() { n = e.prefix.match(prompt) }); err != nil {
		t.Fatal(err)
	}
	return n
}

func blockFiles(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.pkv"))
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestDeleteSessionPurgesItsPrefixBlocks: deleting session A removes the
// blocks only A produced from the prefix store's memory, keeps the system
// prompt's (B and a request without a session produced them too) and B's,
// and an identical prompt afterwards recomputes A's part and generates
// the same tokens.
func TestDeleteSessionPurgesItsPrefixBlocks(t *testing.T) {
	e, _ := newFakeEngine(t, fakeOpts{slots: 1, seqLen: 256, opts: Options{PrefixBlockTokens: 16}})
	a, b := purgeScenario(t, e)
	if n := matchStored(t, e, a.Tokens); n != held(a) {
		t.Fatalf("before the deletion the store holds %d of A's %d tokens", n, held(a))
	}
	before := e.Stats()
	p, err := e.DeleteSession("A")
	if err != nil {
		t.Fatal(err)
	}
	want := Purged{PrefixBlocks: 4, PrefixTokens: held(a) - 32, PrefixBytes: 4 * 16 * 4, SharedBlocks: 2}
	if p != want {
		t.Errorf("purged %+v, want %+v", p, want)
	}
	if n := matchStored(t, e, a.Tokens); n != 32 {
		t.Errorf("after the deletion the store holds %d of A's tokens, want the 32 of the system prompt", n)
	}
	if n := matchStored(t, e, b.Tokens); n != held(b) {
		t.Errorf("B's %d tokens: %d left in the store", held(b), n)
	}
	st := e.Stats()
	if st.PrefixStorePurged != 4 || st.SessionsDeleted != 1 || before.PrefixStoreBytes-st.PrefixStoreBytes != 4*16*4 {
		t.Errorf("stats: %d blocks purged, %d sessions deleted, %d → %d bytes", st.PrefixStorePurged, st.SessionsDeleted, before.PrefixStoreBytes, st.PrefixStoreBytes)
	}
	prompt := append(slices.Clone(a.Tokens), 5, 5)
	got, r := collect(t, e, Request{Tokens: prompt, MaxTokens: 6, StopTokens: []int32{}})
	if r.CachedTokens != 32 || !slices.Equal(got, greedyRef(prompt, 6, 97, nil)) {
		t.Errorf("A's prompt again: %d cached (want 32), tokens %v, want %v", r.CachedTokens, got, greedyRef(prompt, 6, 97, nil))
	}
	// Unknown: nothing changes.
	before = e.Stats()
	if _, err := e.DeleteSession("nobody"); !errors.Is(err, ErrNoSession) {
		t.Errorf("unknown session: %v", err)
	}
	if st := e.Stats(); st.PrefixStoreBytes != before.PrefixStoreBytes || st.SessionsDeleted != before.SessionsDeleted {
		t.Errorf("deleting an unknown session changed the store: %+v → %+v", before, st)
	}
}

// TestDeleteSessionPurgesDiskBlocks: with the disk tier, A's own block
// files are deleted at once, the shared ones no longer name A, an
// identical prompt recomputes what was purged with the same tokens, and
// after a restart the owners come back from the files: deleting B, which
// the new engine never served, deletes B's files.
func TestDeleteSessionPurgesDiskBlocks(t *testing.T) {
	dir := t.TempDir()
	opts := Options{PrefixBlockTokens: 16, PrefixCacheDir: dir, PrefixCacheDiskBytes: -1}
	e, _ := newFakeEngine(t, fakeOpts{slots: 1, seqLen: 256, opts: opts})
	a, b := purgeScenario(t, e)
	if err := e.do(func() { _, _ = e.prefix.flush() }); err != nil { // what shutdown writes
		t.Fatal(err)
	}
	files := blockFiles(t, dir)
	if len(files) != 13 {
		t.Fatalf("%d block files, want 13", len(files))
	}
	p, err := e.DeleteSession("A")
	if err != nil {
		t.Fatal(err)
	}
	if p.PrefixDiskBlocks != 4 || p.PrefixDiskBytes <= 0 || p.PrefixBlocks != 4 || p.SharedBlocks != 4 {
		t.Errorf("purged %+v: want 4 blocks from memory and 4 files, 2 shared blocks kept in each tier", p)
	}
	left := blockFiles(t, dir)
	if len(left) != 9 {
		t.Errorf("%d block files left, want 9", len(left))
	}
	diskOwners(t, e, "A", false)
	if st := e.Stats(); st.PrefixDiskPurged != 4 || st.PrefixDiskBlocks != 9 {
		t.Errorf("stats: %d files purged, %d on disk", st.PrefixDiskPurged, st.PrefixDiskBlocks)
	}
	prompt := append(slices.Clone(a.Tokens), 5, 5)
	got, r := collect(t, e, Request{Tokens: prompt, MaxTokens: 6, StopTokens: []int32{}})
	if r.CachedTokens != 32 || !slices.Equal(got, greedyRef(prompt, 6, 97, nil)) {
		t.Errorf("A's prompt again: %d cached (want 32), tokens %v", r.CachedTokens, got)
	}
	e.Close()

	e2, _ := newFakeEngine(t, fakeOpts{slots: 1, seqLen: 256, opts: opts})
	diskOwners(t, e2, "A", false) // the journal kept A's departure
	diskOwners(t, e2, "B", true)
	if n := matchStored(t, e2, b.Tokens); n != held(b) {
		t.Fatalf("after a restart %d of B's %d tokens on disk", n, held(b))
	}
	n := len(blockFiles(t, dir))
	p, err = e2.DeleteSession("B")
	if err != nil {
		t.Fatal(err)
	}
	if p.PrefixDiskBlocks != 4 || len(blockFiles(t, dir)) != n-4 {
		t.Errorf("B after a restart: purged %+v, %d files → %d", p, n, len(blockFiles(t, dir)))
	}
	if n := matchStored(t, e2, b.Tokens); n != 32 {
		t.Errorf("B's tokens after its deletion: %d stored, want 32", n)
	}
	n = len(blockFiles(t, dir))
	if _, err := e2.DeleteSession("B"); !errors.Is(err, ErrNoSession) || len(blockFiles(t, dir)) != n {
		t.Errorf("B again: %v, %d files → %d", err, n, len(blockFiles(t, dir)))
	}
}

// diskOwners checks whether any block on e's disk tier names owner.
func diskOwners(t *testing.T, e *Engine, owner string, want bool) {
	t.Helper()
	found := false
	if err := e.do(func() {
		for _, b := range e.prefix.disk.blocks {
			found = found || slices.Contains(b.owners, owner)
		}
	}); err != nil {
		t.Fatal(err)
	}
	if found != want {
		t.Errorf("a block on disk names %s: %v, want %v", owner, found, want)
	}
}

// TestDeleteSessionWithASessionStore: the session store's files go too,
// and a session that left its slot (evicted to the store) takes its
// content in that slot with it.
func TestDeleteSessionWithASessionStore(t *testing.T) {
	store := t.TempDir()
	e, _ := newFakeEngine(t, fakeOpts{slots: 1, seqLen: 256, opts: Options{PrefixBlockTokens: 16, SessionStore: store, SessionStoreMaxBytes: -1}})
	_, a := collect(t, e, Request{Tokens: seqTokens(3, 50), MaxTokens: 4, SessionID: "A"})
	// B evicts A to the store; then A's content is still in the slot
	// until B's replaces it — B continues none of it here, so it goes to
	// the prefix store.
	collect(t, e, Request{Tokens: seqTokens(9, 20), MaxTokens: 4, SessionID: "B"})
	entries, _ := os.ReadDir(store)
	p, err := e.DeleteSession("A")
	if err != nil {
		t.Fatal(err)
	}
	if !p.Stored || p.PrefixBlocks != 4 || p.PrefixTokens != held(a) {
		t.Errorf("purged %+v: want the store's files and A's 4 blocks (%d tokens)", p, held(a))
	}
	if after, _ := os.ReadDir(store); len(after) >= len(entries) {
		t.Errorf("session store: %d entries before, %d after", len(entries), len(after))
	}
	if _, ok := sessionIDs(t, e)["A"]; ok {
		t.Error("A still listed")
	}
}

// TestDeleteSessionBusyChangesNothing: a session with a request running or
// waiting for a slot is not deleted (ErrSessionBusy), and nothing of it is
// purged.
func TestDeleteSessionBusyChangesNothing(t *testing.T) {
	e, _ := newFakeEngine(t, fakeOpts{slots: 1, seqLen: 256, delay: time.Millisecond, opts: Options{PrefixBlockTokens: 16}})
	a, _ := purgeScenario(t, e)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.Generate(ctx, Request{Tokens: seqTokens(5, 10), MaxTokens: 200, SessionID: "X", StopTokens: []int32{}}, func(Event) error {
			select {
			case <-started:
			default:
				close(started)
			}
			return nil
		})
	}()
	<-started
	queued := make(chan struct{})
	go func() {
		defer close(queued)
		e.Generate(ctx, Request{Tokens: append(slices.Clone(a.Tokens), 1), MaxTokens: 2, SessionID: "A"}, func(Event) error { return nil })
	}()
	for e.Stats().QueueDepth == 0 {
		time.Sleep(time.Millisecond)
	}
	before := e.Stats()
	for _, id := range []string{"X", "A"} {
		if p, err := e.DeleteSession(id); !errors.Is(err, ErrSessionBusy) || p != (Purged{}) {
			t.Errorf("deleting %s while busy: %+v, %v", id, p, err)
		}
	}
	if st := e.Stats(); st.PrefixStoreBytes != before.PrefixStoreBytes || st.PrefixStorePurged != 0 || st.SessionsDeleted != 0 {
		t.Errorf("a refused deletion changed the store: %+v", st)
	}
	cancel()
	<-done
	<-queued
}

// TestSessionTTLPurgesPrefixBlocks: the session TTL removes an idle
// session's blocks from the prefix store as DeleteSession does (shared
// blocks stay while another owner has them), and leaves the blocks of a
// session still within the TTL.
func TestSessionTTLPurgesPrefixBlocks(t *testing.T) {
	clock := newTestClock()
	e, _ := newFakeEngine(t, fakeOpts{slots: 1, seqLen: 256, opts: Options{PrefixBlockTokens: 16, SessionTTL: time.Hour, Clock: clock.now}})
	a, b := purgeScenario(t, e)
	clock.add(30 * time.Minute)
	e.expireSessions()
	if n := matchStored(t, e, a.Tokens); n != held(a) {
		t.Fatalf("within the TTL the store holds %d of A's %d tokens", n, held(a))
	}
	// B is active again (its whole transcript restored into the slot), A is not.
	_, rb := collect(t, e, Request{Tokens: append(slices.Clone(b.Tokens), 9), MaxTokens: 2, SessionID: "B", StopTokens: []int32{}})
	clock.add(time.Hour)
	e.expireSessions()
	if n := matchStored(t, e, a.Tokens); n != 32 {
		t.Errorf("after A's TTL the store holds %d of A's tokens, want the 32 shared with B and the anonymous request", n)
	}
	if n := matchStored(t, e, b.Tokens); n != held(b) {
		t.Errorf("B, active 0 s ago in its slot: %d of %d tokens left in the store", n, held(b))
	}
	if st := e.Stats(); st.PrefixStorePurged != 4 {
		t.Errorf("%d blocks purged, want A's 4", st.PrefixStorePurged)
	}
	// Once B's slot goes idle beyond the TTL too, B's slot and blocks go.
	clock.add(2 * time.Hour)
	e.expireSessions()
	if n := matchStored(t, e, rb.Tokens); n != 32 {
		t.Errorf("after B's TTL the store holds %d of B's tokens, want 32", n)
	}
}
