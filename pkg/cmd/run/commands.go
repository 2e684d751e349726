package run

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// chatter answers user messages, local or remote, and keeps the
// conversation the slash commands act on.
type chatter interface {
	turn(ctx context.Context, user string) error
	// banner describes what answers: model, where it runs, context size.
	banner() string
	// reset starts a new conversation (the system message stays).
	reset()
	// saved is the conversation as /save writes it.
	saved() savedChat
	// stats describes the last turn (ok false before the first) and the
	// conversation's size.
	stats() (last turnInfo, ok bool, conversation string)
}

// savedChat is the JSON /save writes: the messages in OpenAI's shape (they
// can be sent again as a request) and, for a local model, the exact tokens.
type savedChat struct {
	Model    string  `json:"model"`
	Saved    string  `json:"saved"`
	Messages any     `json:"messages,omitempty"`
	Text     string  `json:"text,omitempty"` // --raw: the text so far
	Tokens   []int32 `json:"tokens,omitempty"`
}

const helpText = `Commands:
  /help          this list
  /reset         start a new conversation (the system message stays)
  /save [FILE]   write the conversation as JSON (default: ellm-chat-<time>.json)
  /stats         tokens, cached tokens, time to first token and tokens/s of the last answer
  /exit          quit (also /bye, exit, quit, Ctrl-D, or Ctrl-C at the prompt)
Ctrl-C while the model answers stops that answer only.
A message that starts with "/" is sent by doubling it: "//etc" sends "/etc".
`

// errQuit is what a command returns to end the chat.
var errQuit = errors.New("quit")

// command runs a slash command; out is where its answer goes.
func command(c chatter, line string, out io.Writer, now func() time.Time) error {
	name, arg, _ := strings.Cut(line, " ")
	arg = strings.TrimSpace(arg)
	switch name {
	case "/help", "/?":
		fmt.Fprint(out, helpText)
	case "/exit", "/quit", "/bye":
		return errQuit
	case "/reset", "/clear":
		c.reset()
		fmt.Fprintln(out, "New conversation.")
	case "/stats":
		last, ok, conv := c.stats()
		if !ok {
			fmt.Fprintln(out, "No answer yet.")
		} else {
			last.print(out)
		}
		fmt.Fprintln(out, conv)
	case "/save":
		s := c.saved()
		s.Saved = now().UTC().Format(time.RFC3339)
		if arg == "" {
			arg = "ellm-chat-" + now().Format("20060102-150405") + ".json"
		}
		b, err := json.MarshalIndent(s, "", "  ")
		if err != nil {
			return fmt.Errorf("/save: %w", err)
		}
		if err := os.WriteFile(arg, append(b, '\n'), 0o644); err != nil {
			return fmt.Errorf("/save: %w", err)
		}
		fmt.Fprintf(out, "Saved to %s.\n", arg)
	default:
		return fmt.Errorf("unknown command %s: /help lists them", name)
	}
	return nil
}
