package bench

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/ellm-dev/ellm/bench"
	"github.com/ellm-dev/ellm/pkg/client"
	"github.com/ellm-dev/ellm/pkg/cmdutil"
)

// ServeOptions are the inputs of `ellm bench serve`.
type ServeOptions struct {
	Common
	URL         string
	APIKey      string
	Model       string
	Concurrency string
	Requests    int
	MaxTokens   int
	PromptWords int
	Dataset     string
	Timeout     time.Duration
	AllowRemote bool
}

func newCmdServe(f *cmdutil.Factory, runF func(*ServeOptions) error) *cobra.Command {
	opts := &ServeOptions{Common: Common{IO: f.IO, Version: f.Version}}
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Load an OpenAI-compatible server: TTFT, TPOT and latency percentiles, throughput, errors",
		Long: `Sends streaming chat completions to any OpenAI-compatible server (ellm serve,
llama-server, vLLM) at each concurrency level and reports TTFT, time per output
token and end-to-end latency percentiles, request and token throughput and errors.
Runs are bounded by --requests and --timeout, and only loopback servers are loaded
unless --allow-remote is given.`,
		Example: `  ellm serve --batch-size 4 &
  ellm bench serve --url http://127.0.0.1:8000 --concurrency 1,2,4 --requests 32`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(opts)
			}
			return serveRun(cmd, opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.URL, "url", "http://127.0.0.1:8000", "server base URL")
	fl.StringVar(&opts.APIKey, "api-key", "", "bearer token")
	fl.StringVar(&opts.Model, "model", "", "model name to request (default: the server's)")
	fl.StringVar(&opts.Concurrency, "concurrency", "1,2,4", "concurrent requests, one run per value")
	fl.IntVar(&opts.Requests, "requests", 16, "requests per concurrency level")
	fl.IntVar(&opts.MaxTokens, "max-tokens", 64, "max_tokens of each request")
	fl.IntVar(&opts.PromptWords, "prompt-words", 128, "length of synthetic prompts in words")
	fl.StringVar(&opts.Dataset, "dataset", "synthetic", `"synthetic" or a JSONL file of {"messages": [...]} or {"prompt": "..."}`)
	fl.DurationVar(&opts.Timeout, "timeout", 10*time.Minute, "time limit per concurrency level")
	fl.BoolVar(&opts.AllowRemote, "allow-remote", false, "allow a non-loopback --url")
	fl.Uint64Var(&opts.Seed, "seed", 1, "seed of the synthetic prompts")
	addOutputFlags(cmd, &opts.Common)
	return cmd
}

func serveRun(cmd *cobra.Command, opts *ServeOptions) error {
	conc, err := parseInts("concurrency", opts.Concurrency)
	if err != nil {
		return err
	}
	if opts.Requests < 1 {
		return fmt.Errorf("--requests %d: must be at least 1", opts.Requests)
	}
	c := &client.Client{BaseURL: opts.URL, APIKey: opts.APIKey, Model: opts.Model}
	p := opts.progress(len(conc)*opts.Requests, "requests")
	res, err := bench.RunServe(cmd.Context(), bench.ServeOptions{
		URL: opts.URL, Concurrency: conc, Requests: opts.Requests, MaxTokens: opts.MaxTokens,
		PromptWords: opts.PromptWords, Dataset: opts.Dataset, Timeout: opts.Timeout,
		AllowRemote: opts.AllowRemote, Seed: opts.Seed,
	}, bench.ClientStream(c), p)
	p.Done()
	if err != nil {
		return err
	}
	if opts.Plot != "" {
		var x, p50, p90 []float64
		for _, r := range res {
			x, p50, p90 = append(x, float64(r.Concurrency)), append(p50, r.TTFTms.Median), append(p90, r.TTFTms.P90)
		}
		if err := bench.Plot(opts.Plot, "TTFT vs concurrency ("+opts.URL+")", "concurrent requests", "TTFT (ms)",
			bench.Series{Name: "p50", X: x, Y: p50}, bench.Series{Name: "p90", X: x, Y: p90}); err != nil {
			return err
		}
	}
	return opts.write(bench.Report{Kind: "serve", Machine: bench.DescribeMachine(0), Results: res})
}
