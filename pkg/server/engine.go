package server

import (
	"context"

	"github.com/ellm-dev/ellm/pkg/engine"
)

// Engine is what the server uses of pkg/engine's *engine.Engine, in its
// types, so that tests can run the server on a fake. The model's tokenizer,
// template and defaults come apart, as a conversation.Model.
type Engine interface {
	Generate(ctx context.Context, req engine.Request, fn func(engine.Event) error) (engine.Result, error)
	Info() engine.Info
	Stats() engine.Stats
	// Transcript returns a session's stored transcript (none without a
	// session store); SaveTranscript stores one, marking the session used.
	Transcript(id string) (engine.Transcript, bool)
	SaveTranscript(id string, t engine.Transcript) error
	// Sessions lists the sessions the engine holds (in slots and the store).
	Sessions() ([]engine.SessionInfo, error)
	// DeleteSession forgets a session and purges its KV (engine.Purged):
	// engine.ErrNoSession if unknown, engine.ErrSessionBusy while a request
	// of it runs or waits.
	DeleteSession(id string) (engine.Purged, error)
	// SaveSessions writes the sessions held in slots to the store now.
	SaveSessions() error
}

var _ Engine = (*engine.Engine)(nil)
