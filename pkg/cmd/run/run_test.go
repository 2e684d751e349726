package run

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/ellm-dev/ellm/pkg/cmdutil"
	"github.com/ellm-dev/ellm/pkg/engine"
	"github.com/ellm-dev/ellm/pkg/modelcfg"
	"github.com/ellm-dev/ellm/pkg/server"
	"github.com/ellm-dev/ellm/pkg/sharedtest"
)

func TestNewCmdRunFlags(t *testing.T) {
	tests := []struct {
		args string
		want func(*Options) bool
	}{
		{"", func(o *Options) bool {
			return o.ModelPath == "" && o.BatchSize == 1 && o.SequenceLength == 4096 && o.Think && !o.NoThink &&
				o.Temperature < 0 && o.TopK < 0 && o.Seed < 0 && o.DType == "bf16"
		}},
		{"--model-path /m -p hi --raw --max-tokens 7", func(o *Options) bool {
			return o.ModelPath == "/m" && o.Prompt == "hi" && o.Raw && o.MaxTokens == 7
		}},
		{"--temperature 0 --top-p 0.9 --top-k 5 --min-p 0.1 --repetition-penalty 1.2 --seed 3 --no-think", func(o *Options) bool {
			return o.Temperature == 0 && o.TopP == 0.9 && o.TopK == 5 && o.MinP == 0.1 && o.RepetitionPenalty == 1.2 && o.Seed == 3 && o.NoThink
		}},
		{"--threads 2 --dtype int8 --kv-dtype f32 --sequence-length 512 --batch-size 2 --chunk-size 64 --system s -v --url http://x --api-key k", func(o *Options) bool {
			return o.Threads == 2 && o.DType == "int8" && o.KVDType == "f32" && o.SequenceLength == 512 && o.BatchSize == 2 &&
				o.ChunkSize == 64 && o.System == "s" && o.Verbose && o.URL == "http://x" && o.APIKey == "k"
		}},
	}
	for _, tt := range tests {
		t.Run(tt.args, func(t *testing.T) {
			var got *Options
			f := &cmdutil.Factory{IO: cmdutil.IOStreams{In: &bytes.Buffer{}, Out: &bytes.Buffer{}, ErrOut: &bytes.Buffer{}}}
			cmd := NewCmdRun(f, func(o *Options) error { got = o; return nil })
			argv := strings.Fields(tt.args)
			cmd.SetArgs(argv)
			if err := cmd.Execute(); err != nil {
				t.Fatal(err)
			}
			if !tt.want(got) {
				t.Errorf("options %+v", got)
			}
		})
	}
}

func testOptions(t *testing.T, in string) (*Options, *bytes.Buffer, *bytes.Buffer) {
	t.Helper()
	out, errOut := &bytes.Buffer{}, &bytes.Buffer{}
	no := false
	return &Options{
		IO:  cmdutil.IOStreams{In: strings.NewReader(in), Out: out, ErrOut: errOut},
		Ctx: context.Background(),
		EngineFlags: cmdutil.EngineFlags{ModelPath: sharedtest.Path(t, "models", "tiny-qwen3-a"),
			DType: "bf16", KVDType: "bf16", Threads: 2, SequenceLength: 512, BatchSize: 1},
		Think: true, MaxTokens: 8, Temperature: 0, TopP: -1, TopK: -1, MinP: -1, RepetitionPenalty: -1, Seed: -1,
		Terminal: &no,
	}, out, errOut
}

var statsLine = regexp.MustCompile(`\[prompt (\d+) tokens: (\d+) cached, (\d+) prefilled; TTFT [^;]+; (\d+) tokens`)

type turn struct{ prompt, cached, prefilled, completion int }

func turns(t *testing.T, errOut string) []turn {
	t.Helper()
	var out []turn
	for _, m := range statsLine.FindAllStringSubmatch(errOut, -1) {
		var n [4]int
		for i := range n {
			n[i], _ = strconv.Atoi(m[i+1])
		}
		out = append(out, turn{n[0], n[1], n[2], n[3]})
	}
	return out
}

func TestOneShot(t *testing.T) {
	o, out, errOut := testOptions(t, "")
	o.Prompt, o.Verbose = "Tell me a story", true
	if err := runRun(o); err != nil {
		t.Fatal(err)
	}
	ts := turns(t, errOut.String())
	if len(ts) != 1 || ts[0].completion == 0 {
		t.Fatalf("stats %v; stderr:\n%s", ts, errOut)
	}
	if strings.TrimSpace(out.String()) == "" {
		t.Errorf("no answer printed")
	}
	if strings.Contains(out.String(), "\x1b[") {
		t.Errorf("escape codes in non-terminal output: %q", out)
	}
	// Greedy twice gives the same answer.
	o2, out2, _ := testOptions(t, "")
	o2.ModelPath, o2.Prompt = o.ModelPath, o.Prompt
	if err := runRun(o2); err != nil {
		t.Fatal(err)
	}
	if out.String() != out2.String() {
		t.Errorf("greedy answers differ:\n%q\n%q", out, out2)
	}
}

func TestPromptFromStdinAndRaw(t *testing.T) {
	o, out, errOut := testOptions(t, "Once upon a time")
	o.Prompt, o.Raw, o.Verbose = "-", true, true
	if err := runRun(o); err != nil {
		t.Fatal(err)
	}
	ts := turns(t, errOut.String())
	// Raw: the prompt is the text itself, 4 tokens, no template around it.
	if len(ts) != 1 || ts[0].prompt != 4 {
		t.Errorf("raw prompt stats %v", ts)
	}
	if out.Len() == 0 {
		t.Errorf("no output")
	}
}

func TestInteractiveTurnsPrefillOnlyTheDelta(t *testing.T) {
	o, out, errOut := testOptions(t, "Hello there\n\nHow are you?\nAnd then?\nexit\nnot read\n")
	o.Verbose, o.NoThink = true, true
	if err := runRun(o); err != nil {
		t.Fatal(err)
	}
	ts := turns(t, errOut.String())
	if len(ts) != 3 {
		t.Fatalf("%d turns, want 3 (empty line skipped, exit ends); stderr:\n%s", len(ts), errOut)
	}
	for i := 1; i < len(ts); i++ {
		// All but the reply's last token, which gets its KV with this turn.
		prev := ts[i-1].prompt + ts[i-1].completion
		if ts[i].cached != prev-1 {
			t.Errorf("turn %d: cached %d, want the previous transcript %d but its last token", i+1, ts[i].cached, prev)
		}
		if ts[i].prefilled != ts[i].prompt-ts[i].cached || ts[i].prefilled > 30 {
			t.Errorf("turn %d: prefilled %d of %d", i+1, ts[i].prefilled, ts[i].prompt)
		}
	}
	if strings.Contains(out.String(), "not read") {
		t.Errorf("input after exit was used")
	}
}

func TestInterruptStopsOnlyTheAnswer(t *testing.T) {
	o, _, errOut := testOptions(t, "")
	ints := make(chan os.Signal, 1)
	pr, pw := io.Pipe()
	started := make(chan struct{})
	o.IO.Out = &firstWrite{w: o.IO.Out, first: started}
	o.IO.In, o.Interrupts, o.Verbose, o.MaxTokens = pr, ints, true, 400
	done := make(chan error, 1)
	go func() { done <- runRun(o) }()
	pw.Write([]byte("Write a long story\n"))
	<-started
	ints <- os.Interrupt // stops the answer
	pw.Write([]byte("Again\n"))
	pw.Write([]byte("quit\n"))
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if ts := turns(t, errOut.String()); len(ts) != 2 {
		t.Errorf("%d turns after an interrupt, want 2; stderr:\n%s", len(ts), errOut)
	}
	// The interrupted answer's stats line says so (it used to end in "; ]").
	lines := statsLines.FindAllString(errOut.String(), -1)
	if len(lines) != 2 || !strings.HasSuffix(lines[0], "; interrupted]") || strings.Contains(errOut.String(), "; ]") {
		t.Errorf("stats lines %q", lines)
	}
}

var statsLines = regexp.MustCompile(`\[prompt [^\n]*\]`)

func TestInteractiveCommands(t *testing.T) {
	file := filepath.Join(t.TempDir(), "chat.json")
	o, out, errOut := testOptions(t, "/help\nHello there\n/stats\n/save "+file+
		"\n/reset\nHello there\n/bogus\n//slash text\n/stats\n/exit\nnot read\n")
	o.Verbose, o.NoThink, o.System = true, true, "Be brief."
	if err := runRun(o); err != nil {
		t.Fatal(err)
	}
	// The banner: model, synthetic or not, kernels, threads, context, how to quit.
	// (--verbose logs the engine's start-up first.)
	stderr := errOut.String()
	i := strings.Index(stderr, "tiny-qwen3-a · ")
	if i < 0 {
		t.Fatalf("no banner in %q", stderr)
	}
	banner := strings.SplitN(stderr[i:], "\n", 3)
	for _, want := range []string{"tiny", "thinking off", "kernels, 2 threads", "context 512 tokens"} {
		if !strings.Contains(banner[0], want) {
			t.Errorf("banner %q lacks %q", banner[0], want)
		}
	}
	if strings.Contains(banner[0], "synthetic") || !strings.Contains(banner[1], "/exit") {
		t.Errorf("banner %q", banner[:2])
	}
	if !strings.Contains(out.String(), "/reset ") || !strings.Contains(out.String(), "/save [FILE]") {
		t.Errorf("/help not shown: %q", out)
	}
	ts := turns(t, errOut.String())
	if len(ts) != 3 {
		t.Fatalf("%d turns, want 3 (commands are not sent, //slash is); stderr:\n%s", len(ts), errOut)
	}
	// /reset starts anew: the same first message is the same prompt, nothing
	// of the old conversation cached (its slot was freed).
	if ts[1].prompt != ts[0].prompt || ts[1].cached != 0 {
		t.Errorf("after /reset: %+v, first turn %+v", ts[1], ts[0])
	}
	// /stats repeats the last answer's stats line on standard output.
	st := turns(t, out.String())
	if len(st) != 2 || st[0] != ts[0] || st[1] != ts[2] {
		t.Errorf("/stats printed %+v, turns were %+v", st, ts)
	}
	if !strings.Contains(out.String(), "Conversation: ") || !strings.Contains(errOut.String(), "unknown command /bogus") {
		t.Errorf("stdout %q\nstderr %q", out, errOut)
	}
	if strings.Contains(out.String(), "not read") {
		t.Error("input after /exit was used")
	}

	var saved struct {
		Model    string
		Saved    string
		Messages []message
		Tokens   []int32
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &saved); err != nil {
		t.Fatal(err)
	}
	m := saved.Messages
	if saved.Model == "" || saved.Saved == "" || len(m) != 3 || m[0].Role != "system" || m[1].Content != "Hello there" ||
		m[2].Role != "assistant" || len(saved.Tokens) != ts[0].prompt+ts[0].completion {
		t.Errorf("saved %s", b)
	}
}

// firstWrite closes first when the answer starts streaming.
type firstWrite struct {
	w     io.Writer
	first chan struct{}
	once  sync.Once
}

func (f *firstWrite) Write(p []byte) (int, error) {
	f.once.Do(func() { close(f.first) })
	return f.w.Write(p)
}

func TestErrors(t *testing.T) {
	o, _, _ := testOptions(t, "")
	o.URL, o.Prompt = "http://127.0.0.1:1", "hi"
	if err := runRun(o); err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Errorf("--url to nothing: %v", err)
	}
	o, _, _ = testOptions(t, "")
	o.ModelPath = t.TempDir()
	if err := runRun(o); err == nil {
		t.Errorf("empty model dir: no error")
	}
	o, _, _ = testOptions(t, "")
	o.Prompt, o.Temperature = "x", -1
	o.TopP = 3
	if err := runRun(o); err == nil || !strings.Contains(err.Error(), "top_p") {
		t.Errorf("top-p 3: %v", err)
	}
	o, _, _ = testOptions(t, "")
	o.Prompt, o.SequenceLength = strings.Repeat("word ", 600), 512
	if err := runRun(o); err == nil || !strings.Contains(err.Error(), "sequence length") {
		t.Errorf("prompt longer than the sequence: %v", err)
	}
}

func TestRemote(t *testing.T) {
	local, _, _ := testOptions(t, "")
	md, err := cmdutil.OpenModel(local.ModelPath, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.New(md, engine.Options{Threads: 2, SequenceLength: 512})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	srv, err := server.New(eng, md.Conversation(), server.Options{})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()

	o, out, errOut := testOptions(t, "Hello there\nHow are you?\n/reset\nHello there\n")
	o.URL, o.ModelPath, o.Verbose, o.NoThink = hs.URL, "", true, true
	if err := runRun(o); err != nil {
		t.Fatal(err)
	}
	ts := turns(t, errOut.String())
	if len(ts) != 3 || ts[0].completion == 0 || out.Len() == 0 {
		t.Fatalf("turns %v, output %q, stderr:\n%s", ts, out, errOut)
	}
	if ts[1].cached == 0 {
		t.Errorf("turn 2 reused nothing on the server: %v", ts)
	}
	if ts[2].prompt != ts[0].prompt {
		t.Errorf("after /reset the prompt has %d tokens, the first had %d", ts[2].prompt, ts[0].prompt)
	}
	if banner := errOut.String(); !strings.HasPrefix(banner, hs.URL+" · tiny-qwen3-a · chat, thinking off\n") {
		t.Errorf("remote banner %q", banner)
	}
}

func TestDefaultModel(t *testing.T) {
	if testing.Short() {
		t.Skip("generates the built-in model on first use")
	}
	o, out, errOut := testOptions(t, "")
	o.ModelPath, o.Prompt = "", "hello"
	if err := runRun(o); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(errOut.String(), "synthetic") || out.Len() == 0 {
		t.Errorf("stdout %q stderr %q", out, errOut)
	}
}

// run resolves sampling as the server does: a flag that is set, else the
// model's generation_config (penalties included), else temperature 1.
func TestSamplingLikeTheServer(t *testing.T) {
	unset := &Options{Temperature: -1, TopP: -1, TopK: -1, MinP: -1, RepetitionPenalty: -1, Seed: -1}
	p, err := samplingParams(unset, modelcfg.GenerationConfig{})
	if err != nil || p.Temperature != 1 || p.TopP != 1 || p.TopK != 0 || p.RepetitionPenalty != 1 || p.Seed != nil {
		t.Errorf("no flags, no generation_config: %+v, %v", p, err)
	}
	half, temp := 0.5, 0.6
	g := modelcfg.GenerationConfig{Temperature: &temp, PresencePenalty: &half, FrequencyPenalty: &half}
	if p, err = samplingParams(unset, g); err != nil || p.Temperature != 0.6 || p.PresencePenalty != 0.5 || p.FrequencyPenalty != 0.5 {
		t.Errorf("generation_config's defaults: %+v, %v", p, err)
	}
	set := *unset
	set.Temperature, set.TopK, set.Seed = 0, 5, 3
	if p, err = samplingParams(&set, g); err != nil || p.Temperature != 0 || p.TopK != 5 || p.Seed == nil || *p.Seed != 3 || p.PresencePenalty != 0.5 {
		t.Errorf("flags over generation_config: %+v, %v", p, err)
	}
	set.TopP = 1.5
	if _, err := samplingParams(&set, g); err == nil || !strings.Contains(err.Error(), "top_p") {
		t.Errorf("--top-p 1.5: %v", err)
	}
}
