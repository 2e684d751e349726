package server

import (
	"container/list"
	"encoding/json"
	"log/slog"
	"sync"
	"time"

	"github.com/ellm-dev/ellm/pkg/conversation"
	"github.com/ellm-dev/ellm/pkg/engine"
)

// chatPrompt renders the conversation and tokenizes it. When sessionID names
// a session whose conversation the new one extends by the model's reply and
// new messages, the prompt is the session's transcript followed by the
// tokens of the new messages only (conversation.Model.Continue), so that the
// engine prefills just those.
func (s *Server) chatPrompt(c conversation.Chat, sessionID string) (conversation.Prompt, error) {
	var prev *conversation.Session
	if sessionID != "" {
		prev, _ = s.sessions.get(sessionID)
	}
	p, err := s.chat.Prompt(prev, c)
	switch {
	case err != nil:
		return p, renderError(err)
	case p.Continued:
		s.metrics.sessionHits.Inc()
		s.metrics.sessionReused.Add(float64(len(prev.Transcript)))
	case sessionID != "":
		s.metrics.sessionMisses.Inc()
	}
	return p, nil
}

// remember records a chat request in its session, also when it was cut
// short (drain, disconnect, error) once it had generated something: the
// transcript is what the model saw and wrote.
func (s *Server) remember(p *chatPlan, res engine.Result) {
	if p.session == "" || len(res.Tokens) <= res.PromptTokens {
		return
	}
	sess := &conversation.Session{Chat: p.conv.Compact(), Transcript: res.Tokens}
	if err := s.sessions.put(p.session, sess); err != nil {
		s.opts.Logger.Warn("session not persisted", "session", p.session, "err", err)
	}
}

// sessionStore holds the most recently used sessions in memory, in front
// of the engine, which owns their storage: every session put here is handed
// to the engine's session store (when it has one) and read back from it
// after leaving memory or a restart.
type sessionStore struct {
	eng Engine
	max int
	ttl time.Duration // a session idle for longer is forgotten; 0 = never
	now func() time.Time
	log *slog.Logger

	mu    sync.Mutex
	lru   *list.List // of *entry, most recent first
	byKey map[string]*list.Element
}

type entry struct {
	id   string
	sess *conversation.Session
	used time.Time
}

func newSessionStore(eng Engine, max int, ttl time.Duration, now func() time.Time, log *slog.Logger) *sessionStore {
	return &sessionStore{eng: eng, max: max, ttl: ttl, now: now, log: log, lru: list.New(), byKey: map[string]*list.Element{}}
}

func (st *sessionStore) get(id string) (*conversation.Session, bool) {
	st.mu.Lock()
	if e, ok := st.byKey[id]; ok {
		ent := e.Value.(*entry)
		if st.ttl > 0 && st.now().Sub(ent.used) > st.ttl {
			// Expired: the engine's copy too, as it was saved at the same time.
			st.lru.Remove(e)
			delete(st.byKey, id)
			st.mu.Unlock()
			return nil, false
		}
		st.lru.MoveToFront(e)
		st.mu.Unlock()
		return ent.sess, true
	}
	st.mu.Unlock()
	t, ok := st.eng.Transcript(id)
	if !ok {
		return nil, false
	}
	sess := &conversation.Session{Transcript: t.Tokens}
	if err := json.Unmarshal(t.Data, &sess.Chat); err != nil {
		st.log.Warn("session store: transcript without its conversation, ignored", "session", id, "err", err)
		return nil, false
	}
	st.keep(id, sess, st.now())
	return sess, true
}

func (st *sessionStore) put(id string, sess *conversation.Session) error {
	st.keep(id, sess, st.now())
	data, err := json.Marshal(sess.Chat)
	if err != nil {
		return err
	}
	return st.eng.SaveTranscript(id, engine.Transcript{Tokens: sess.Transcript, Data: data})
}

// keep puts a session in memory, forgetting the least recently used one
// beyond max (the engine's store keeps it, if there is one).
func (st *sessionStore) keep(id string, sess *conversation.Session, used time.Time) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if e, ok := st.byKey[id]; ok {
		ent := e.Value.(*entry)
		ent.sess, ent.used = sess, used
		st.lru.MoveToFront(e)
		return
	}
	st.byKey[id] = st.lru.PushFront(&entry{id, sess, used})
	for st.lru.Len() > st.max {
		old := st.lru.Remove(st.lru.Back()).(*entry)
		delete(st.byKey, old.id)
	}
}

// forget drops a session from memory and reports whether it was there.
func (st *sessionStore) forget(id string) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	e, ok := st.byKey[id]
	if ok {
		st.lru.Remove(e)
		delete(st.byKey, id)
	}
	return ok
}

// list returns the sessions held in memory that have not expired.
func (st *sessionStore) list() []engine.SessionInfo {
	st.mu.Lock()
	defer st.mu.Unlock()
	now := st.now()
	var out []engine.SessionInfo
	for e := st.lru.Front(); e != nil; e = e.Next() {
		ent := e.Value.(*entry)
		if st.ttl > 0 && now.Sub(ent.used) > st.ttl {
			continue
		}
		out = append(out, engine.SessionInfo{ID: ent.id, Tokens: len(ent.sess.Transcript), LastUsed: ent.used})
	}
	return out
}
