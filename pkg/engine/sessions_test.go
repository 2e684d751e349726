package engine

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"
)

func sessionIDs(t *testing.T, e *Engine) map[string]SessionInfo {
	t.Helper()
	list, err := e.Sessions()
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]SessionInfo{}
	for _, s := range list {
		if _, dup := m[s.ID]; dup {
			t.Errorf("session %s listed twice", s.ID)
		}
		m[s.ID] = s
	}
	return m
}

func TestEngineSessionsListDeleteExpire(t *testing.T) {
	clock := newTestClock()
	dir := t.TempDir()
	e, _ := newFakeEngine(t, fakeOpts{slots: 2, opts: Options{SessionStore: dir, SessionTTL: time.Hour,
		SessionStoreMaxBytes: -1, Clock: clock.now}})
	// a and b in slots, c pushes a (least recently used) to the store.
	var res [3]Result
	for i := range res {
		clock.add(time.Minute)
		_, res[i] = collect(t, e, Request{Tokens: seqTokens(i*7, 12), MaxTokens: 4, SessionID: sid(i)})
		if err := e.SaveTranscript(sid(i), Transcript{Tokens: res[i].Tokens, Data: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	got := sessionIDs(t, e)
	if len(got) != 3 || got[sid(0)].InSlot || !got[sid(1)].InSlot || !got[sid(2)].InSlot {
		t.Fatalf("sessions %+v", got)
	}
	if a := got[sid(0)]; a.Bytes == 0 || a.KVTokens != held(res[0]) || a.Tokens != len(res[0].Tokens) {
		t.Errorf("stored session a %+v, transcript %d tokens", a, len(res[0].Tokens))
	}
	if tr, ok := e.Transcript(sid(1)); !ok || !slices.Equal(tr.Tokens, res[1].Tokens) {
		t.Errorf("transcript of b: %v %v", tr, ok)
	}

	// Deleting a session held in a slot leaves nothing: no prefix of it is reused.
	if _, err := e.DeleteSession(sid(1)); err != nil {
		t.Fatal(err)
	}
	if _, ok := sessionIDs(t, e)[sid(1)]; ok {
		t.Error("deleted session still listed")
	}
	if _, ok := e.Transcript(sid(1)); ok {
		t.Error("deleted session's transcript still stored")
	}
	_, r := collect(t, e, Request{Tokens: append(slices.Clone(res[1].Tokens), 1, 2), MaxTokens: 2})
	if r.CachedTokens != 0 {
		t.Errorf("%d tokens of a deleted session reused", r.CachedTokens)
	}
	if _, err := e.DeleteSession(sid(0)); err != nil { // only in the store
		t.Fatal(err)
	}
	for _, id := range []string{"never-seen", ""} {
		if _, err := e.DeleteSession(id); !errors.Is(err, ErrNoSession) {
			t.Errorf("deleting unknown session %q: %v", id, err)
		}
	}

	// Sessions idle beyond the TTL go, in slots and in the store.
	clock.add(2 * time.Hour)
	e.expireSessions()
	if got := sessionIDs(t, e); len(got) != 0 {
		t.Errorf("after the TTL: %+v", got)
	}
	if st := e.Stats(); st.SessionsExpired < 2 || st.SessionsStored != 0 || st.Sessions != 0 {
		t.Errorf("stats after the TTL %+v", st)
	}
}

func TestSaveSessionsWritesSlotsNow(t *testing.T) {
	dir := t.TempDir()
	e, _ := newFakeEngine(t, fakeOpts{slots: 2, opts: Options{SessionStore: dir, SessionStoreMaxBytes: -1}})
	_, r := collect(t, e, Request{Tokens: seqTokens(1, 10), MaxTokens: 3, SessionID: "s"})
	if e.store.has("s") {
		t.Fatal("KV stored before SaveSessions")
	}
	if err := e.SaveSessions(); err != nil {
		t.Fatal(err)
	}
	// The KV covers the transcript but its last sampled token, which the
	// next turn computes with its delta.
	if got := sessionIDs(t, e)["s"]; !e.store.has("s") || got.KVTokens != held(r) {
		t.Errorf("after SaveSessions: %+v, transcript %d", got, len(r.Tokens))
	}
	e.Close()
	if err := e.SaveSessions(); !errors.Is(err, ErrClosed) {
		t.Errorf("SaveSessions after Close: %v", err)
	}
}

func TestDeleteBusySession(t *testing.T) {
	e, _ := newFakeEngine(t, fakeOpts{slots: 1, delay: 2 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		first := true
		e.Generate(ctx, Request{Tokens: seqTokens(3, 5), MaxTokens: 120, SessionID: "busy", StopTokens: []int32{}}, func(Event) error {
			if first {
				close(started)
				first = false
			}
			<-ctx.Done()
			return ctx.Err()
		})
	}()
	<-started
	if _, err := e.DeleteSession("busy"); !errors.Is(err, ErrSessionBusy) {
		t.Errorf("deleting a busy session: %v", err)
	}
	cancel()
	<-done
	if _, err := e.DeleteSession("busy"); err != nil {
		t.Errorf("deleting the session once idle: %v", err)
	}
}
