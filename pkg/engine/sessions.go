package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Transcript is what a session's client keeps with it besides the KV: the
// exact tokens of the conversation and the client's own data (the server
// keeps the messages they were rendered from). The engine stores it in the
// session store, checked like KV and tied to the model and tokenizer.
type Transcript struct {
	Tokens []int32
	Data   json.RawMessage
}

// SessionInfo describes a session the engine holds in a slot or in the store.
type SessionInfo struct {
	ID       string
	Tokens   int   // of its transcript (or of the slot, for a session only held there)
	KVTokens int   // positions whose KV is kept (in the slot, else in the store)
	Bytes    int64 // on disk
	LastUsed time.Time
	InSlot   bool
}

var (
	// ErrNoSession: the engine holds no session of that id.
	ErrNoSession = errors.New("no such session")
	// ErrSessionBusy: a request of the session is running.
	ErrSessionBusy = errors.New("session busy")
)

// Transcript returns session id's stored transcript. Without a session
// store there is none.
func (e *Engine) Transcript(id string) (Transcript, bool) {
	if e.store == nil {
		return Transcript{}, false
	}
	return e.store.transcript(id)
}

// SaveTranscript stores t as session id's transcript (marking the session
// used now); without a session store it does nothing.
func (e *Engine) SaveTranscript(id string, t Transcript) error {
	if e.store == nil || id == "" {
		return nil
	}
	return e.store.saveTranscript(id, t)
}

// Sessions lists the sessions held in slots and in the store.
func (e *Engine) Sessions() ([]SessionInfo, error) {
	var inSlots []SessionInfo
	err := e.do(func() {
		for _, s := range e.slots {
			if s.session != "" {
				inSlots = append(inSlots, SessionInfo{ID: s.session, Tokens: len(s.tokens), KVTokens: s.kv,
					LastUsed: s.usedAt, InSlot: true})
			}
		}
	})
	if err != nil {
		return nil, err
	}
	if e.store == nil {
		return inSlots, nil
	}
	out := e.store.list()
	for _, sl := range inSlots {
		found := false
		for i := range out {
			if out[i].ID == sl.ID {
				out[i].InSlot, out[i].KVTokens = true, sl.KVTokens
				out[i].LastUsed = later(out[i].LastUsed, sl.LastUsed)
				found = true
			}
		}
		if !found {
			out = append(out, sl)
		}
	}
	return out, nil
}

// Purged is what DeleteSession removed.
type Purged struct {
	// SlotTokens: positions of the session's KV dropped from slots (its
	// own, and a slot it left that still held its content).
	SlotTokens int
	// Stored: the session store's transcript and KV files were deleted.
	Stored bool
	// The prefix store's blocks that only this session produced: removed
	// from memory (their buffers zeroed), block files deleted from disk.
	PrefixBlocks, PrefixTokens int
	PrefixBytes                int64
	PrefixDiskBlocks           int
	PrefixDiskBytes            int64
	// SharedBlocks: blocks the session produced that stay because another
	// session or a request without one produced them too (a common system
	// prompt), in memory and on disk; the session's name is removed from
	// them.
	SharedBlocks int
}

// DeleteSession forgets session id and purges its KV: its slot, its files
// in the session store, and the prefix store's blocks (memory and disk)
// that only it produced. ErrNoSession if the engine held nothing of it,
// ErrSessionBusy (nothing changed) while one of its requests runs or waits.
func (e *Engine) DeleteSession(id string) (Purged, error) {
	var p Purged
	if id == "" {
		return p, fmt.Errorf("%w: empty id", ErrNoSession) // "" is a slot without a session
	}
	inSlot, busy := false, false
	err := e.do(func() {
		busy = e.sessionBusy(id)
		if busy {
			return
		}
		for _, s := range e.slots {
			if s.job == nil && (s.session == id || s.owner == id) {
				inSlot = inSlot || s.session == id
				p.SlotTokens += s.kv
				e.dropSlotSession(s)
			}
		}
		if e.prefix == nil {
			return
		}
		mem, disk := e.purgePrefix(id)
		p.PrefixBlocks, p.PrefixTokens, p.PrefixBytes = mem.blocks, mem.tokens, mem.bytes
		p.PrefixDiskBlocks, p.PrefixDiskBytes = disk.blocks, disk.bytes
		p.SharedBlocks = mem.kept + disk.kept
	})
	if err != nil {
		return p, err
	}
	if busy {
		return p, fmt.Errorf("%w: %s", ErrSessionBusy, id)
	}
	if e.store != nil {
		if p.Stored, err = e.store.remove(id); err != nil {
			return p, err
		}
	}
	if !inSlot && !p.Stored && p.SlotTokens == 0 && p.PrefixBlocks+p.PrefixDiskBlocks+p.SharedBlocks == 0 {
		return p, fmt.Errorf("%w: %s", ErrNoSession, id)
	}
	e.mu.Lock()
	e.stats.SessionsDeleted++
	e.mu.Unlock()
	return p, nil
}

// sessionBusy reports whether a request of session id runs or waits for a
// slot. Scheduler goroutine only.
func (e *Engine) sessionBusy(id string) bool {
	for _, s := range e.slots {
		if s.job != nil && s.job.req.SessionID == id {
			return true
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, j := range slices.Concat(e.queue, e.incoming) {
		if j.req.SessionID == id {
			return true
		}
	}
	return false
}

// SaveSessions writes the KV of every idle session held in a slot to the
// store now (a draining server calls it; Close does it too).
func (e *Engine) SaveSessions() error {
	if e.store == nil {
		return nil
	}
	var err error
	if derr := e.do(func() { err = e.saveSlotSessions() }); derr != nil {
		return derr
	}
	return err
}

// saveSlotSessions writes the idle sessions held in slots to the store.
// Scheduler goroutine only.
func (e *Engine) saveSlotSessions() error {
	if e.store == nil {
		return nil
	}
	var errs []error
	for _, s := range e.slots {
		if s.session != "" && s.job == nil {
			if err := e.store.save(s.session, s.tokens, s.kv, s.id, e.be, s.usedAt); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// dropSlotSession empties s of its session's tokens. Scheduler goroutine only.
func (e *Engine) dropSlotSession(s *slot) {
	s.session, s.owner, s.tokens, s.kv = "", "", s.tokens[:0], 0
	e.mu.Lock()
	e.updateSlotStats()
	e.mu.Unlock()
}

// expireSessions deletes the sessions idle beyond the session TTL, in the
// store, in slots and in the prefix store.
func (e *Engine) expireSessions() {
	if e.opts.SessionTTL <= 0 {
		return
	}
	if e.store != nil {
		e.store.expire()
	}
	_ = e.do(func() {
		now := e.opts.Clock()
		for _, s := range e.slots {
			if s.session != "" && s.job == nil && now.Sub(s.usedAt) > e.opts.SessionTTL {
				e.dropSlotSession(s)
				e.mu.Lock()
				e.stats.SessionsExpired++
				e.mu.Unlock()
			}
		}
		// Their blocks in the prefix store go too, as DeleteSession's do,
		// unless the session is active again (in a slot or a request).
		for _, id := range e.prefix.expired(now, e.opts.SessionTTL) {
			if e.sessionBusy(id) || slices.ContainsFunc(e.slots, func(s *slot) bool { return s.session == id }) {
				continue
			}
			e.purgePrefix(id)
		}
	})
}

// purgePrefix removes session id from the prefix store (prefixStore.purge)
// and updates the store's stats. Scheduler goroutine only.
func (e *Engine) purgePrefix(id string) (mem, disk purged) {
	mem, disk = e.prefix.purge(id)
	e.mu.Lock()
	e.stats.PrefixStorePurged += int64(mem.blocks)
	e.prefixStatsLocked()
	e.mu.Unlock()
	return mem, disk
}

// janitor expires sessions periodically: one goroutine per engine, none
// per session.
func (e *Engine) janitor(done chan<- struct{}) {
	defer close(done)
	period := min(max(e.opts.SessionTTL/10, time.Second), time.Minute)
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-e.done:
			return
		case <-t.C:
			e.expireSessions()
		}
	}
}

// do runs f on the scheduler goroutine between two steps and waits for it.
func (e *Engine) do(f func()) error {
	ran := make(chan struct{})
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return ErrClosed
	}
	e.ctl = append(e.ctl, func() { f(); close(ran) })
	e.mu.Unlock()
	e.signal()
	select {
	case <-ran:
		return nil
	case <-e.done:
		select {
		case <-ran:
			return nil
		default:
			return ErrClosed
		}
	}
}
