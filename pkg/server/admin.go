package server

import (
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/ellm-dev/ellm/pkg/engine"
)

// sessionObject is a session in GET /v1/sessions.
type sessionObject struct {
	ID     string `json:"id"`
	Object string `json:"object"`
	// Tokens of the session's transcript.
	Tokens int `json:"tokens"`
	// CachedTokens: positions whose KV the engine keeps (in a slot or on disk).
	CachedTokens int   `json:"cached_tokens"`
	Bytes        int64 `json:"bytes"`     // on disk
	LastUsed     int64 `json:"last_used"` // Unix seconds
	InSlot       bool  `json:"in_slot"`
}

// sessionList merges what the engine holds with the transcripts in
// memory, most recently used first.
func (s *Server) sessionList() ([]sessionObject, error) {
	list, err := s.eng.Sessions()
	if err != nil {
		return nil, err
	}
	byID := map[string]int{}
	var merged []engine.SessionInfo
	for _, si := range append(list, s.sessions.list()...) {
		i, ok := byID[si.ID]
		if !ok {
			byID[si.ID] = len(merged)
			merged = append(merged, si)
			continue
		}
		m := &merged[i]
		m.Tokens = max(m.Tokens, si.Tokens)
		if si.LastUsed.After(m.LastUsed) {
			m.LastUsed = si.LastUsed
		}
	}
	slices.SortFunc(merged, func(a, b engine.SessionInfo) int {
		return cmp.Or(b.LastUsed.Compare(a.LastUsed), strings.Compare(a.ID, b.ID))
	})
	out := make([]sessionObject, len(merged))
	for i, si := range merged {
		out[i] = sessionObject{ID: si.ID, Object: "session", Tokens: si.Tokens, CachedTokens: si.KVTokens,
			Bytes: si.Bytes, LastUsed: si.LastUsed.Unix(), InSlot: si.InSlot}
	}
	return out, nil
}

func (s *Server) handleSessions(w http.ResponseWriter, _ *http.Request) error {
	list, err := s.sessionList()
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, struct {
		Object string          `json:"object"`
		Data   []sessionObject `json:"data"`
	}{"list", list})
	return nil
}

// purgedObject is what DELETE /v1/sessions/{id} removed (engine.Purged).
type purgedObject struct {
	SlotTokens       int   `json:"slot_tokens"`
	SessionStore     bool  `json:"session_store"`
	PrefixBlocks     int   `json:"prefix_blocks"`
	PrefixTokens     int   `json:"prefix_tokens"`
	PrefixBytes      int64 `json:"prefix_bytes"`
	PrefixDiskBlocks int   `json:"prefix_disk_blocks"`
	PrefixDiskBytes  int64 `json:"prefix_disk_bytes"`
	SharedBlocksKept int   `json:"shared_blocks_kept"`
}

func (s *Server) handleDeleteSession(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	p, err := s.eng.DeleteSession(id)
	switch {
	case errors.Is(err, engine.ErrSessionBusy):
		return &apiError{status: http.StatusConflict, typ: "invalid_request_error", param: "session_id", code: "session_busy",
			msg: fmt.Sprintf("session %q has a request running or queued: nothing was deleted; retry once it ends", id), retryAfter: 1}
	case err != nil && !errors.Is(err, engine.ErrNoSession):
		return err
	}
	if inMemory := s.sessions.forget(id); err != nil && !inMemory {
		return &apiError{status: http.StatusNotFound, typ: "not_found_error", param: "session_id", code: "session_not_found",
			msg: fmt.Sprintf("no session %q", id)}
	}
	writeJSON(w, http.StatusOK, struct {
		ID      string       `json:"id"`
		Object  string       `json:"object"`
		Deleted bool         `json:"deleted"`
		Purged  purgedObject `json:"purged"`
	}{id, "session", true, purgedObject{SlotTokens: p.SlotTokens, SessionStore: p.Stored, PrefixBlocks: p.PrefixBlocks,
		PrefixTokens: p.PrefixTokens, PrefixBytes: p.PrefixBytes, PrefixDiskBlocks: p.PrefixDiskBlocks,
		PrefixDiskBytes: p.PrefixDiskBytes, SharedBlocksKept: p.SharedBlocks}})
	return nil
}

// SaveSessions writes every session to the session store now: transcripts
// are written as each request ends, so this saves the KV the engine holds
// in slots. A draining server calls it before the engine closes.
func (s *Server) SaveSessions() error {
	return s.eng.SaveSessions()
}
