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

	"github.com/ellm-dev/ellm/pkg/chat"
	"github.com/ellm-dev/ellm/pkg/cmdutil"
	"github.com/ellm-dev/ellm/pkg/engine"
	"github.com/ellm-dev/ellm/pkg/modelcfg"
	"github.com/ellm-dev/ellm/pkg/reasoning"
	"github.com/ellm-dev/ellm/pkg/sample"
	"github.com/ellm-dev/ellm/pkg/tokenizer"
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
the built-in synthetic model (random weights) is used.`,
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
		if err := cmdutil.ChooseKernels(opts.Version, eo.Logger); err != nil {
			return err
		}
		eng, err := engine.New(eo)
		if err != nil {
			return err
		}
		defer eng.Close()
		conv, err := newConversation(opts, eng, terminal)
		if err != nil {
			return err
		}
		c = conv
	}
	if opts.Prompt != "" {
		return c.turn(opts.Ctx, prompt)
	}
	return interactive(opts, c, terminal)
}

// conversation is one chat with the engine.
type conversation struct {
	opts     *Options
	eng      *engine.Engine
	tok      *tokenizer.Tokenizer
	tmpl     *renderer
	params   sample.Params
	session  string
	terminal bool

	history    []message
	transcript []int32 // the last turn's tokens, exactly as the model saw and wrote them
	last       *turnInfo
}

type message struct {
	Role             string `json:"role"`
	Content          string `json:"content"`
	ReasoningContent string `json:"reasoning_content,omitempty"`
}

// renderer renders messages with the model's template.
type renderer struct {
	t      *chat.Template
	kwargs json.RawMessage
}

func (c *renderer) render(msgs []message, addGenerationPrompt bool) (string, error) {
	b, err := json.Marshal(msgs)
	if err != nil {
		return "", err
	}
	return c.t.Render(chat.Input{Messages: b, AddGenerationPrompt: addGenerationPrompt, Kwargs: c.kwargs})
}

func newConversation(opts *Options, eng *engine.Engine, terminal bool) (*conversation, error) {
	c := &conversation{opts: opts, eng: eng, tok: eng.Tokenizer(), terminal: terminal}
	if !opts.Raw {
		t := eng.ChatTemplate()
		if t == nil {
			return nil, errors.New("the model has no chat template: use --raw")
		}
		kw, _ := json.Marshal(map[string]bool{"enable_thinking": opts.thinking()})
		c.tmpl = &renderer{t: t, kwargs: kw}
	}
	c.start()
	p, err := samplingParams(opts, eng.GenerationDefaults())
	if err != nil {
		return nil, err
	}
	c.params = p
	return c, nil
}

// start begins a conversation: a new session, only the system message.
func (c *conversation) start() {
	c.session = newSessionID()
	c.history, c.transcript, c.last = nil, nil, nil
	if c.tmpl != nil && c.opts.System != "" {
		c.history = append(c.history, message{Role: "system", Content: c.opts.System})
	}
}

func newSessionID() string { return fmt.Sprintf("ellm-run-%d", time.Now().UnixNano()) }

// reset frees the old conversation's slot and starts anew.
func (c *conversation) reset() {
	if err := c.eng.DeleteSession(c.session); err != nil && !errors.Is(err, engine.ErrNoSession) {
		fmt.Fprintln(c.opts.IO.ErrOut, "warning:", err)
	}
	c.start()
}

func (c *conversation) banner() string {
	i := c.eng.Info()
	model := i.ModelName
	if i.Synthetic {
		model += " (synthetic: random weights, the answers are noise)"
	}
	mode := "chat, thinking " + onOff(c.opts.thinking())
	if c.tmpl == nil {
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

func (c *conversation) saved() savedChat {
	s := savedChat{Model: c.eng.Info().ModelName, Tokens: c.transcript}
	if c.tmpl != nil {
		s.Messages = c.history
	} else {
		s.Text = c.tok.Decode(c.transcript)
	}
	return s
}

func (c *conversation) stats() (turnInfo, bool, string) {
	conv := fmt.Sprintf("Conversation: %d of %d tokens.", len(c.transcript), c.eng.Info().SequenceLength)
	if c.last == nil {
		return turnInfo{}, false, conv
	}
	return *c.last, true, conv
}

// samplingParams takes each flag that is set, else the model's default.
func samplingParams(o *Options, g modelcfg.GenerationConfig) (sample.Params, error) {
	var p sample.Params
	pick := func(flag float32, def *float64, fallback float32) float32 {
		switch {
		case flag >= 0:
			return flag
		case def != nil:
			return float32(*def)
		}
		return fallback
	}
	p.Temperature = pick(o.Temperature, g.Temperature, 0.7)
	if g.DoSample != nil && !*g.DoSample && o.Temperature < 0 {
		p.Temperature = 0
	}
	p.TopP = pick(o.TopP, g.TopP, 1)
	p.MinP = pick(o.MinP, g.MinP, 0)
	p.RepetitionPenalty = pick(o.RepetitionPenalty, g.RepetitionPenalty, 1)
	switch {
	case o.TopK >= 0:
		p.TopK = o.TopK
	case g.TopK != nil:
		p.TopK = *g.TopK
	}
	if o.Seed >= 0 {
		s := uint64(o.Seed)
		p.Seed = &s
	}
	if err := p.Validate(); err != nil {
		return p, fmt.Errorf("sampling: %w", err)
	}
	return p, nil
}

// prompt returns the tokens of the conversation with the user's new message.
// After the first turn they are the previous transcript, exactly as the model
// saw and wrote it, followed by the template's text from the end of the
// previous turn to the new generation prompt: the engine's session holds all
// but that delta. (Templates that re-render history differently, such as
// Qwen3's dropping past reasoning, would otherwise force a full prefill.)
func (c *conversation) prompt(user string) ([]int32, bool, error) {
	if c.tmpl == nil {
		return append(slices.Clone(c.transcript), c.tok.Encode(user)...), false, nil
	}
	msg := message{Role: "user", Content: user}
	text, err := c.tmpl.render(append(slices.Clone(c.history), msg), true)
	if err != nil {
		return nil, false, err
	}
	opens := reasoning.PromptOpensThinking(text)
	if c.transcript != nil {
		if delta, ok := c.delta(text, msg); ok {
			return append(slices.Clone(c.transcript), delta...), opens, nil
		}
	}
	return c.tok.Encode(text), opens, nil
}

// delta is the tokens that follow the previous transcript in text: the
// end-of-turn token if the answer did not end with it, then the text after
// the previous turn's end-of-turn marker.
func (c *conversation) delta(text string, msg message) ([]int32, bool) {
	eos := c.eng.EOS()
	if len(eos) == 0 {
		return nil, false
	}
	marker := c.tok.Decode(eos[:1])
	tail, err := c.tmpl.render([]message{msg}, true)
	if err != nil || marker == "" || !strings.HasSuffix(text, tail) {
		return nil, false
	}
	i := strings.LastIndex(text[:len(text)-len(tail)], marker)
	if i < 0 {
		return nil, false
	}
	var ids []int32
	if last := c.transcript[len(c.transcript)-1]; !slices.Contains(eos, last) {
		ids = append(ids, eos[0])
	}
	return append(ids, c.tok.Encode(text[i+len(marker):])...), true
}

// turn answers one user message, streaming the answer to Out.
func (c *conversation) turn(ctx context.Context, user string) error {
	ids, opens, err := c.prompt(user)
	if err != nil {
		return err
	}
	p := &printer{out: c.opts.IO.Out, terminal: c.terminal}
	dec := tokenizer.NewDecoderWith(c.tok, tokenizer.DecodeOptions{SkipSpecial: true})
	var rs *reasoning.Stream
	if c.tmpl != nil {
		rs = reasoning.NewStream(opens)
	}
	emit := func(text string) {
		if rs == nil {
			p.add("", text)
			return
		}
		p.add(rs.Add(text))
	}
	res, err := c.eng.Generate(ctx, engine.Request{
		Tokens: ids, SessionID: c.session, MaxTokens: c.maxTokens(len(ids)), Sampling: c.params,
	}, func(ev engine.Event) error {
		emit(dec.Add(ev.Token))
		return nil
	})
	emit(dec.Flush())
	if rs != nil {
		p.add(rs.Flush())
	}
	p.finish()
	finish := res.FinishReason
	if err != nil {
		if !interrupted(err, c.opts.Ctx) {
			return err
		}
		finish = "interrupted"
	}
	c.transcript = res.Tokens
	if c.tmpl != nil {
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

func (c *conversation) maxTokens(prompt int) int {
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
