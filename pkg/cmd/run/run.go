// Package run implements `ellm run`: an interactive terminal chat, or one
// answer to -p, on the engine in this process.
package run

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/ellm-dev/ellm/pkg/cmdutil"
	"github.com/ellm-dev/ellm/pkg/conversation"
	"github.com/ellm-dev/ellm/pkg/engine"
	"github.com/ellm-dev/ellm/pkg/modelcfg"
	"github.com/ellm-dev/ellm/pkg/sample"
)

// Options are the inputs of `ellm run`.
type Options struct {
	IO      cmdutil.IOStreams
	Ctx     context.Context
	Version string

	cmdutil.EngineFlags

	// Prompt answers once and exits ("-" reads it from standard input);
	// empty starts the interactive chat.
	Prompt string
	Raw    bool // no chat template: the prompt is the model's input text
	System string
	Think  bool
	// NoThink overrides Think (--no-think).
	NoThink bool

	MaxTokens int
	// Sampling flags; negative = the model's generation_config default.
	Temperature, TopP, MinP, RepetitionPenalty float32
	TopK                                       int
	Seed                                       int64 // negative = random

	Verbose bool

	URL, APIKey string

	// Terminal forces terminal output (colours, prompt) on or off; nil detects it.
	Terminal *bool
	// Interrupts delivers Ctrl-C in interactive mode; nil installs a SIGINT
	// handler when standard input is a terminal.
	Interrupts <-chan os.Signal
}

func (o *Options) thinking() bool { return o.Think && !o.NoThink }

// overrides are the sampling flags that are set (not negative): a local
// model resolves them over its generation_config, a server over its own.
func (o *Options) overrides() conversation.Overrides {
	var r conversation.Overrides
	set := func(flag float32) *float64 {
		if flag < 0 {
			return nil
		}
		v := float64(flag)
		return &v
	}
	r.Temperature, r.TopP, r.MinP, r.RepetitionPenalty = set(o.Temperature), set(o.TopP), set(o.MinP), set(o.RepetitionPenalty)
	if o.TopK >= 0 {
		r.TopK = &o.TopK
	}
	if o.Seed >= 0 {
		s := uint64(o.Seed)
		r.Seed = &s
	}
	return r
}

// NewCmdRun returns the cobra command; runF replaces the behaviour in tests.
func NewCmdRun(f *cmdutil.Factory, runF func(*Options) error) *cobra.Command {
	opts := &Options{IO: f.IO, Version: f.Version}
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Chat in the terminal or answer one prompt",
		Long: `Chat with a model in the terminal, or answer one prompt with -p.

Each chat turn reuses the KV cache of the conversation so far: only the new
message is prefilled. Reasoning (<think>) is shown dimmed on a terminal.

Commands in the chat: /help, /reset (new conversation), /save [FILE] (the
conversation as JSON), /stats (tokens, cached tokens, time to first token
and tokens/s of the last answer), /exit. Ctrl-C stops the current answer;
Ctrl-C at the prompt, Ctrl-D or /exit ends the chat. Without --model-path
the built-in synthetic model (random weights) is used.

Sampling is resolved as the server does: each sampling flag that is set
wins, else the model's generation_config.json (penalties included), else
temperature 1, top-p 1, top-k off, min-p 0 and no penalties.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Ctx = cmd.Context()
			if runF != nil {
				return runF(opts)
			}
			return runRun(opts)
		},
	}
	fl := cmd.Flags()
	opts.EngineFlags.AddFlags(fl, 4096, "KV positions per conversation", 1, "KV cache slots")
	fl.StringVarP(&opts.Prompt, "prompt", "p", "", `answer this prompt and exit ("-" reads standard input)`)
	fl.BoolVar(&opts.Raw, "raw", false, "send the prompt as is, without the chat template")
	fl.StringVar(&opts.System, "system", "", "system message")
	fl.BoolVar(&opts.Think, "think", true, "let the model reason before answering (enable_thinking)")
	fl.BoolVar(&opts.NoThink, "no-think", false, "disable reasoning (enable_thinking=false)")
	fl.IntVar(&opts.MaxTokens, "max-tokens", 0, "most tokens per answer (0 = up to the sequence length)")
	fl.Float32Var(&opts.Temperature, "temperature", -1, "sampling temperature, 0 = greedy; -1 = the model's generation_config")
	fl.Float32Var(&opts.TopP, "top-p", -1, "nucleus sampling probability; -1 = the model's")
	fl.IntVar(&opts.TopK, "top-k", -1, "sample among the k most likely tokens, 0 = off; -1 = the model's")
	fl.Float32Var(&opts.MinP, "min-p", -1, "drop tokens less likely than min-p × the most likely; -1 = the model's")
	fl.Float32Var(&opts.RepetitionPenalty, "repetition-penalty", -1, "penalise tokens already seen, 1 = off; -1 = the model's")
	fl.Int64Var(&opts.Seed, "seed", -1, "sampling seed; -1 = random")
	fl.BoolVarP(&opts.Verbose, "verbose", "v", false, "print time to first token, prefilled/cached tokens and tokens/s per answer")
	fl.StringVar(&opts.URL, "url", "", "chat with a running OpenAI-compatible server instead of loading a model")
	fl.StringVar(&opts.APIKey, "api-key", "", "API key for --url")
	return cmd
}

func runRun(opts *Options) error {
	if opts.Ctx == nil {
		opts.Ctx = context.Background()
	}
	prompt := opts.Prompt
	if prompt == "-" {
		b, err := io.ReadAll(opts.IO.In)
		if err != nil {
			return fmt.Errorf("read prompt: %w", err)
		}
		prompt = string(b)
	}
	terminal := isTerminal(opts.IO.Out)
	if opts.Terminal != nil {
		terminal = *opts.Terminal
	}
	var c chatter
	if opts.URL != "" {
		r, err := newRemote(opts, terminal)
		if err != nil {
			return err
		}
		c = r
	} else {
		eo := opts.EngineFlags.Options()
		eo.Logger = logger(opts.IO.ErrOut, opts.Verbose)
		opts.WeightsCache.Apply(&eo, opts.Version)
		if err := cmdutil.ChooseKernels(opts.Version, opts.KernelFlags, eo.Logger); err != nil {
			return err
		}
		md, err := cmdutil.OpenModel(opts.ModelPath, eo.Logger)
		if err != nil {
			return err
		}
		eng, err := engine.New(md, eo)
		if err != nil {
			return err
		}
		defer eng.Close()
		l, err := newLocal(opts, eng, terminal)
		if err != nil {
			return err
		}
		c = l
	}
	if opts.Prompt != "" {
		return c.turn(opts.Ctx, prompt)
	}
	return interactive(opts, c, terminal)
}

// local is one chat with the engine in this process.
type local struct {
	opts     *Options
	eng      *engine.Engine
	chat     *conversation.Model
	kwargs   json.RawMessage
	params   sample.Params
	session  string
	terminal bool

	history []message
	// last is the last turn's request (its messages, without the reply) and
	// its tokens, exactly as the model saw and wrote them.
	prev conversation.Session
	last *turnInfo
}

type message struct {
	Role             string `json:"role"`
	Content          string `json:"content"`
	ReasoningContent string `json:"reasoning_content,omitempty"`
}

func newLocal(opts *Options, eng *engine.Engine, terminal bool) (*local, error) {
	c := &local{opts: opts, eng: eng, terminal: terminal, chat: eng.Model().Conversation()}
	switch {
	case opts.Raw:
		c.chat.Template = nil
	case c.chat.Template == nil:
		return nil, errors.New("the model has no chat template: use --raw")
	default:
		c.kwargs, _ = json.Marshal(map[string]bool{"enable_thinking": opts.thinking()})
	}
	c.start()
	p, err := samplingParams(opts, c.chat.Generation)
	if err != nil {
		return nil, err
	}
	c.params = p
	return c, nil
}

// start begins a conversation: a new session, only the system message.
func (c *local) start() {
	c.session = newSessionID()
	c.history, c.prev, c.last = nil, conversation.Session{}, nil
	if c.chat.Template != nil && c.opts.System != "" {
		c.history = append(c.history, message{Role: "system", Content: c.opts.System})
	}
}

func newSessionID() string { return fmt.Sprintf("ellm-run-%d", time.Now().UnixNano()) }

// reset frees the old conversation's slot and starts anew.
func (c *local) reset() {
	if _, err := c.eng.DeleteSession(c.session); err != nil && !errors.Is(err, engine.ErrNoSession) {
		fmt.Fprintln(c.opts.IO.ErrOut, "warning:", err)
	}
	c.start()
}

func (c *local) banner() string {
	i := c.eng.Info()
	model := i.ModelName
	if i.Synthetic {
		model += " (synthetic: random weights, the answers are noise)"
	}
	mode := "chat, thinking " + onOff(c.opts.thinking())
	if c.chat.Template == nil {
		mode = "raw text, no chat template"
	}
	threads := fmt.Sprintf("%d threads", i.Threads)
	if i.Threads == 1 {
		threads = "1 thread"
	}
	return fmt.Sprintf("%s · %s · %s kernels, %s · context %d tokens\n%s", model, mode, i.KernelPath, threads,
		i.SequenceLength, quitHint)
}

const quitHint = "Type a message. /help lists commands; /exit, Ctrl-D or Ctrl-C at the prompt quits.\n"

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

func (c *local) saved() savedChat {
	s := savedChat{Model: c.eng.Info().ModelName, Tokens: c.prev.Transcript}
	if c.chat.Template != nil {
		s.Messages = c.history
	} else {
		s.Text = c.chat.Tokenizer.Decode(c.prev.Transcript)
	}
	return s
}

func (c *local) stats() (turnInfo, bool, string) {
	conv := fmt.Sprintf("Conversation: %d of %d tokens.", len(c.prev.Transcript), c.eng.Info().SequenceLength)
	if c.last == nil {
		return turnInfo{}, false, conv
	}
	return *c.last, true, conv
}

// samplingParams takes each flag that is set (not negative), else the
// model's generation_config default, else the documented default
// (conversation.Sampling: the server's rule).
func samplingParams(o *Options, g modelcfg.GenerationConfig) (sample.Params, error) {
	p, err := conversation.Sampling(g, o.overrides())
	if err != nil {
		return p, fmt.Errorf("sampling: %w", err)
	}
	return p, nil
}

// prompt returns the request with the user's new message and its prompt.
// After the first turn the tokens are the previous transcript, exactly as
// the model saw and wrote it, followed by what the new message adds
// (conversation.Model.Prompt): the engine's session holds all but that.
// (Templates that re-render history differently, such as Qwen3's dropping
// past reasoning, would otherwise force a full prefill.)
func (c *local) prompt(user string) (conversation.Chat, conversation.Prompt, error) {
	if c.chat.Template == nil {
		return conversation.Chat{}, conversation.Prompt{Tokens: append(slices.Clone(c.prev.Transcript), c.chat.Tokenizer.Encode(user)...)}, nil
	}
	req := conversation.Chat{Kwargs: c.kwargs}
	for _, m := range append(slices.Clone(c.history), message{Role: "user", Content: user}) {
		b, err := json.Marshal(m)
		if err != nil {
			return req, conversation.Prompt{}, err
		}
		req.Messages = append(req.Messages, b)
	}
	p, err := c.chat.Prompt(&c.prev, req)
	return req, p, err
}

// turn answers one user message, streaming the answer to Out.
func (c *local) turn(ctx context.Context, user string) error {
	req, prompt, err := c.prompt(user)
	if err != nil {
		return err
	}
	ids := prompt.Tokens
	p := &printer{out: c.opts.IO.Out, terminal: c.terminal}
	stream := c.chat.NewStream(conversation.StreamOptions{Reasoning: c.chat.Template != nil, Thinking: prompt.Thinking})
	res, err := c.eng.Generate(ctx, engine.Request{
		Tokens: ids, SessionID: c.session, MaxTokens: c.maxTokens(len(ids)), Sampling: c.params,
	}, func(ev engine.Event) error {
		d, _ := stream.Token(ev.Token)
		p.add(d.Reasoning, d.Content)
		return nil
	})
	for _, d := range stream.Flush() {
		p.add(d.Reasoning, d.Content)
	}
	p.finish()
	finish := res.FinishReason
	if err != nil {
		if !interrupted(err, c.opts.Ctx) {
			return err
		}
		finish = "interrupted"
	}
	c.prev = conversation.Session{Chat: req.Compact(), Transcript: res.Tokens}
	if c.chat.Template != nil {
		c.history = append(c.history, message{Role: "user", Content: user},
			message{Role: "assistant", Content: p.content.String(), ReasoningContent: p.reasoning.String()})
	}
	c.last = &turnInfo{prompt: res.PromptTokens, cached: res.CachedTokens, completion: res.CompletionTokens,
		ttft: res.TTFT, total: res.Total, finish: finish}
	if c.opts.Verbose {
		c.last.print(c.opts.IO.ErrOut)
	}
	return nil
}

// interrupted tells a Ctrl-C of one answer (its context cancelled, the
// program's not) from a failure.
func interrupted(err error, program context.Context) bool {
	return errors.Is(err, context.Canceled) && program.Err() == nil
}

func (c *local) maxTokens(prompt int) int {
	room := c.eng.Info().SequenceLength - prompt
	if c.opts.MaxTokens > 0 {
		return min(c.opts.MaxTokens, max(room, 1))
	}
	return max(room, 1)
}

// interactive prints the banner, then reads user messages and slash
// commands line by line until /exit, EOF or a Ctrl-C at the prompt. A Ctrl-C
// while answering stops only that answer.
func interactive(opts *Options, c chatter, terminal bool) error {
	fmt.Fprint(opts.IO.ErrOut, c.banner())
	ints := opts.Interrupts
	if ints == nil && isTerminal(opts.IO.In) {
		// main's NotifyContext would end the program on the first Ctrl-C.
		signal.Reset(os.Interrupt)
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, os.Interrupt)
		defer signal.Stop(ch)
		ints = ch
	}
	lines := make(chan string)
	readErr := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(opts.IO.In)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
		readErr <- sc.Err()
		close(lines)
	}()
	out := opts.IO.Out
	for {
		if terminal {
			fmt.Fprint(out, ">>> ")
		}
		var line string
		var ok bool
		select {
		case line, ok = <-lines:
		case <-ints:
			fmt.Fprintln(out)
			return nil
		case <-opts.Ctx.Done():
			return nil
		}
		if !ok {
			if terminal {
				fmt.Fprintln(out)
			}
			return <-readErr
		}
		line = strings.TrimSpace(line)
		switch {
		case line == "":
			continue
		case line == "exit" || line == "quit":
			return nil
		case strings.HasPrefix(line, "//"):
			line = line[1:]
		case strings.HasPrefix(line, "/"):
			err := command(c, line, out, time.Now)
			if errors.Is(err, errQuit) {
				return nil
			}
			if err != nil {
				fmt.Fprintln(opts.IO.ErrOut, "error:", err)
			}
			continue
		}
		ctx, cancel := context.WithCancel(opts.Ctx)
		done := make(chan struct{})
		go func() {
			select {
			case <-ints:
				cancel()
			case <-done:
			}
		}()
		err := c.turn(ctx, line)
		close(done)
		cancel()
		if err != nil {
			if opts.Ctx.Err() != nil {
				return nil
			}
			fmt.Fprintln(opts.IO.ErrOut, "error:", err)
		}
	}
}

// logger shows the engine's start-up summary with --verbose, else only warnings.
func logger(w io.Writer, verbose bool) *slog.Logger {
	level := slog.LevelWarn
	if verbose {
		level = slog.LevelInfo
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
}

func isTerminal(x any) bool {
	f, ok := x.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
