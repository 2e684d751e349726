package server

import (
	"bytes"
	"container/list"
	"encoding/json"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"
)

// conversation is what a chat prompt is rendered from.
type conversation struct {
	Messages []json.RawMessage `json:"messages"`
	Tools    json.RawMessage   `json:"tools,omitempty"`
	Kwargs   json.RawMessage   `json:"kwargs,omitempty"`
}

// session is a transcript session: the conversation of its last request and
// the exact tokens the engine saw and generated for it.
type session struct {
	Conv       conversation `json:"conversation"`
	Transcript []int32      `json:"transcript"`
}

// chatPrompt renders the conversation and tokenizes it. When sessionID names
// a session whose conversation the new one extends by the model's reply and
// new messages, the prompt is the session's transcript followed by the
// tokens of the new messages only, so that the engine prefills just those
// (the re-rendered reply would differ from what was generated: Qwen3 drops
// earlier <think> blocks, tool calls are re-rendered from JSON). text is the
// full rendering either way.
func (s *Server) chatPrompt(c conversation, sessionID string) (prompt []int32, text string, err error) {
	text, err = s.render(c, true)
	if err != nil {
		return nil, "", err
	}
	if sessionID != "" {
		if sess, ok := s.sessions.get(sessionID); ok {
			if prompt, ok := s.sessionPrompt(sess, c, text); ok {
				s.metrics.sessionHits.Inc()
				s.metrics.sessionReused.Add(float64(len(sess.Transcript)))
				return prompt, text, nil
			}
		}
		s.metrics.sessionMisses.Inc()
	}
	return s.tok.Encode(text), text, nil
}

// sessionSuffix returns the prompt that continues the session's transcript
// with c's new messages, if c extends the session: the transcript, the end
// token closing the reply when generation did not (max_tokens, a stop
// string), then the tokens of the text the new messages add to the rendered
// conversation after the end of the assistant turn standing for the reply.
func (s *Server) sessionPrompt(sess *session, c conversation, full string) ([]int32, bool) {
	k := len(sess.Conv.Messages)
	t := sess.Transcript
	if len(c.Messages) < k+2 || len(t) == 0 || !jsonEqual(sess.Conv.Tools, c.Tools) || !jsonEqual(sess.Conv.Kwargs, c.Kwargs) {
		return nil, false
	}
	for i := range k {
		if !jsonEqual(sess.Conv.Messages[i], c.Messages[i]) {
			return nil, false
		}
	}
	var m struct{ Role string }
	if json.Unmarshal(c.Messages[k], &m) != nil || m.Role != "assistant" {
		return nil, false
	}
	upto, err := s.render(conversation{Messages: c.Messages[:k+1], Tools: c.Tools, Kwargs: c.Kwargs}, false)
	if err != nil {
		return nil, false
	}
	// The turn ends with one of the end tokens; count the turns up to it
	// and cut the full rendering after as many.
	end, endText := int32(-1), ""
	for _, id := range s.endIDs {
		if txt := string(s.tok.TokenBytes(id)); txt != "" && strings.HasSuffix(strings.TrimRight(upto, " \n"), txt) {
			end, endText = id, txt
		}
	}
	if end < 0 {
		return nil, false
	}
	prompt := slices.Clip(t)
	if last := t[len(t)-1]; last != end {
		if slices.Contains(s.endIDs, last) {
			return nil, false // ended with another end token than the template's
		}
		prompt = append(prompt, end)
	}
	pos := 0
	for range strings.Count(upto, endText) {
		i := strings.Index(full[pos:], endText)
		if i < 0 {
			return nil, false
		}
		pos += i + len(endText)
	}
	return append(prompt, s.tok.Encode(full[pos:])...), true
}

func jsonEqual(a, b json.RawMessage) bool {
	return bytes.Equal(compact(a), compact(b))
}

func compact(m json.RawMessage) []byte {
	var b bytes.Buffer
	if json.Compact(&b, m) != nil {
		return m
	}
	if b.String() == "null" {
		return nil
	}
	return b.Bytes()
}

// remember records a chat request in its session, also when it was cut
// short (drain, disconnect, error) once it had generated something: the
// transcript is what the model saw and wrote.
func (s *Server) remember(p *chatPlan, res Result) {
	if p.session == "" || len(res.Tokens) <= res.PromptTokens {
		return
	}
	c := conversation{Messages: make([]json.RawMessage, len(p.conv.Messages)), Tools: compact(p.conv.Tools), Kwargs: compact(p.conv.Kwargs)}
	for i, m := range p.conv.Messages {
		c.Messages[i] = compact(m)
	}
	if err := s.sessions.put(p.session, &session{Conv: c, Transcript: res.Tokens}); err != nil {
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
	sess *session
	used time.Time
}

func newSessionStore(eng Engine, max int, ttl time.Duration, now func() time.Time, log *slog.Logger) *sessionStore {
	return &sessionStore{eng: eng, max: max, ttl: ttl, now: now, log: log, lru: list.New(), byKey: map[string]*list.Element{}}
}

func (st *sessionStore) get(id string) (*session, bool) {
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
	sess := &session{Transcript: t.Tokens}
	if err := json.Unmarshal(t.Data, &sess.Conv); err != nil {
		st.log.Warn("session store: transcript without its conversation, ignored", "session", id, "err", err)
		return nil, false
	}
	st.keep(id, sess, st.now())
	return sess, true
}

func (st *sessionStore) put(id string, sess *session) error {
	st.keep(id, sess, st.now())
	data, err := json.Marshal(sess.Conv)
	if err != nil {
		return err
	}
	return st.eng.SaveTranscript(id, Transcript{Tokens: sess.Transcript, Data: data})
}

// keep puts a session in memory, forgetting the least recently used one
// beyond max (the engine's store keeps it, if there is one).
func (st *sessionStore) keep(id string, sess *session, used time.Time) {
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
func (st *sessionStore) list() []SessionInfo {
	st.mu.Lock()
	defer st.mu.Unlock()
	now := st.now()
	var out []SessionInfo
	for e := st.lru.Front(); e != nil; e = e.Next() {
		ent := e.Value.(*entry)
		if st.ttl > 0 && now.Sub(ent.used) > st.ttl {
			continue
		}
		out = append(out, SessionInfo{ID: ent.id, Tokens: len(ent.sess.Transcript), LastUsed: ent.used})
	}
	return out
}
