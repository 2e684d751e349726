package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
)

// LlamaCpp runs llama.cpp's own benchmark programs on a GGUF file, so that
// ellm is compared with its peer on the same weights, threads and machine,
// in the same run. llama.cpp is not built by this project: see
// docs/benchmarks.md for how to build it and convert a checkpoint.
type LlamaCpp struct {
	// Bench is the path of llama-bench (prefill and batch-1 decode).
	Bench string
	// BatchedBench is the path of llama-batched-bench, needed only for
	// decode with several sequences at once.
	BatchedBench string
	GGUF         string
	Threads      int
	// CacheType is llama.cpp's K and V cache type (-ctk, -ctv), e.g. "q8_0"
	// against ellm's int8 cache; "" leaves llama.cpp's default, f16.
	CacheType string
	// Exec runs a program and returns its standard output; nil runs it for real.
	Exec func(ctx context.Context, prog string, args ...string) ([]byte, error)
}

func (l *LlamaCpp) exec(ctx context.Context, prog string, args ...string) ([]byte, error) {
	if l.Exec != nil {
		return l.Exec(ctx, prog, args...)
	}
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, prog, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w: %s", prog, strings.Join(args, " "), err, lastLines(stderr.String(), 5))
	}
	return out, nil
}

// Prefill is llama-bench's prompt-processing rate for n tokens after depth
// tokens already in its context (filled untimed), one repetition after
// llama-bench's own warm-up, in tokens per second.
func (l *LlamaCpp) Prefill(ctx context.Context, n, depth int) (float64, error) {
	return l.llamaBench(ctx, "-p", strconv.Itoa(n), "-n", "0", "-d", strconv.Itoa(depth))
}

// Decode is the generation rate of batch sequences at context depth, in
// tokens per second over all sequences: llama-bench's tg test for one
// sequence, llama-batched-bench's S_TG for several.
func (l *LlamaCpp) Decode(ctx context.Context, depth, batch, tokens int) (float64, error) {
	if batch <= 1 {
		return l.llamaBench(ctx, "-p", "0", "-n", strconv.Itoa(tokens), "-d", strconv.Itoa(depth))
	}
	if l.BatchedBench == "" {
		return 0, errors.New("decode with several sequences needs llama-batched-bench (--llama-batched-bench)")
	}
	prompt := max(depth, 1) // batched-bench prefills each sequence's own prompt first
	// Its context is split evenly between the sequences and must hold a
	// 512-token micro-batch per sequence.
	perSeq := max(512, (prompt+tokens+255)/256*256)
	args := append([]string{"-m", l.GGUF, "-t", strconv.Itoa(l.Threads), "-tb", strconv.Itoa(l.Threads),
		"-c", strconv.Itoa(batch * perSeq), "-b", "2048", "-ub", "512",
		"-npp", strconv.Itoa(prompt), "-ntg", strconv.Itoa(tokens), "-npl", strconv.Itoa(batch), "--output-format", "jsonl"}, l.cacheArgs()...)
	out, err := l.exec(ctx, l.BatchedBench, args...)
	if err != nil {
		return 0, err
	}
	return parseBatchedBench(out)
}

func (l *LlamaCpp) llamaBench(ctx context.Context, test ...string) (float64, error) {
	args := append([]string{"-m", l.GGUF, "-t", strconv.Itoa(l.Threads), "-r", "1", "-o", "json"}, test...)
	out, err := l.exec(ctx, l.Bench, append(args, l.cacheArgs()...)...)
	if err != nil {
		return 0, err
	}
	return parseLlamaBench(out)
}

func (l *LlamaCpp) cacheArgs() []string {
	if l.CacheType == "" {
		return nil
	}
	return []string{"-ctk", l.CacheType, "-ctv", l.CacheType}
}

// LlamaCacheType is the llama.cpp cache type that stores K/V as ellm's
// KV cache dtype kv does, so that a decode step at depth reads about as
// many bytes in both engines: its default f16 for bf16 (two bytes a value,
// the precision a user of either engine gets without asking), q8_0 for
// int8 (a byte a value and a scale per 32, against ellm's scale per head
// and position), f32 for f32.
func LlamaCacheType(kv string) (string, error) {
	switch kv {
	case "bf16":
		return "f16", nil
	case "int8":
		return "q8_0", nil
	case "f32":
		return "f32", nil
	}
	return "", fmt.Errorf("kv cache dtype %q has no llama.cpp counterpart (want bf16, int8 or f32)", kv)
}

// parseLlamaBench reads the one test of llama-bench's `-o json` array.
func parseLlamaBench(out []byte) (float64, error) {
	var tests []struct {
		AvgTS float64 `json:"avg_ts"`
	}
	if err := json.Unmarshal(out, &tests); err != nil {
		return 0, fmt.Errorf("llama-bench output: %w", err)
	}
	if len(tests) != 1 || tests[0].AvgTS <= 0 {
		return 0, fmt.Errorf("llama-bench output: want one test with a positive avg_ts, got %d tests", len(tests))
	}
	return tests[0].AvgTS, nil
}

// parseBatchedBench reads S_TG from llama-batched-bench's jsonl line (its
// other output goes to the same stream, so non-JSON lines are skipped).
func parseBatchedBench(out []byte) (float64, error) {
	var found []float64
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(line, "{") {
			continue
		}
		var r struct {
			SpeedTG *float64 `json:"speed_tg"`
		}
		if err := json.Unmarshal([]byte(line), &r); err == nil && r.SpeedTG != nil {
			found = append(found, *r.SpeedTG)
		}
	}
	if len(found) != 1 || found[0] <= 0 {
		return 0, fmt.Errorf("llama-batched-bench output: want one result line with a positive speed_tg, got %d", len(found))
	}
	return found[0], nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
