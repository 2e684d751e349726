package conversation

import (
	"errors"
	"math"
	"testing"

	"github.com/ellm-dev/ellm/pkg/modelcfg"
	"github.com/ellm-dev/ellm/pkg/sample"
)

func ptr[T any](v T) *T { return &v }

func TestSampling(t *testing.T) {
	qwen3 := modelcfg.GenerationConfig{DoSample: ptr(true), Temperature: ptr(0.6), TopP: ptr(0.95), TopK: ptr(20),
		RepetitionPenalty: ptr(1.05), PresencePenalty: ptr(0.5)}
	for _, tc := range []struct {
		name string
		g    modelcfg.GenerationConfig
		r    Overrides
		want sample.Params
	}{
		{name: "no generation_config: the documented defaults",
			want: sample.Params{Temperature: 1, TopP: 1, RepetitionPenalty: 1}},
		{name: "generation_config's defaults, penalties included", g: qwen3,
			want: sample.Params{Temperature: 0.6, TopP: 0.95, TopK: 20, RepetitionPenalty: 1.05, PresencePenalty: 0.5}},
		{name: "the request over generation_config", g: qwen3,
			r:    Overrides{Temperature: ptr(0.0), TopK: ptr(-1), PresencePenalty: ptr(0.0), FrequencyPenalty: ptr(1.5), MinP: ptr(0.1), Seed: ptr(uint64(7))},
			want: sample.Params{Temperature: 0, TopP: 0.95, TopK: -1, MinP: 0.1, RepetitionPenalty: 1.05, FrequencyPenalty: 1.5, Seed: ptr(uint64(7))}},
		{name: "do_sample false: greedy by default", g: modelcfg.GenerationConfig{DoSample: ptr(false), Temperature: ptr(0.7)},
			want: sample.Params{TopP: 1, RepetitionPenalty: 1}},
		{name: "do_sample false, the request samples", g: modelcfg.GenerationConfig{DoSample: ptr(false)}, r: Overrides{Temperature: ptr(0.8)},
			want: sample.Params{Temperature: 0.8, TopP: 1, RepetitionPenalty: 1}},
		{name: "do_sample unset, temperature 0 in the file", g: modelcfg.GenerationConfig{Temperature: ptr(0.0)},
			want: sample.Params{TopP: 1, RepetitionPenalty: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Sampling(tc.g, tc.r)
			if err != nil {
				t.Fatal(err)
			}
			seedOK := (p.Seed == nil) == (tc.want.Seed == nil) && (p.Seed == nil || *p.Seed == *tc.want.Seed)
			p.Seed, tc.want.Seed = nil, nil
			if !seedOK || p.Temperature != tc.want.Temperature || p.TopP != tc.want.TopP || p.TopK != tc.want.TopK || p.MinP != tc.want.MinP ||
				p.RepetitionPenalty != tc.want.RepetitionPenalty || p.PresencePenalty != tc.want.PresencePenalty || p.FrequencyPenalty != tc.want.FrequencyPenalty {
				t.Errorf("got %+v, want %+v", p, tc.want)
			}
		})
	}
}

func TestSamplingRanges(t *testing.T) {
	for _, tc := range []struct {
		param string
		r     Overrides
	}{
		{"temperature", Overrides{Temperature: ptr(-0.1)}},
		{"temperature", Overrides{Temperature: ptr(math.NaN())}},
		{"top_p", Overrides{TopP: ptr(0.0)}},
		{"min_p", Overrides{MinP: ptr(1.5)}},
		{"presence_penalty", Overrides{PresencePenalty: ptr(2.5)}},
		{"frequency_penalty", Overrides{FrequencyPenalty: ptr(-3.0)}},
		{"repetition_penalty", Overrides{RepetitionPenalty: ptr(0.0)}},
		{"top_k", Overrides{TopK: ptr(-2)}},
	} {
		_, err := Sampling(modelcfg.GenerationConfig{}, tc.r)
		var pe *ParamError
		if !errors.As(err, &pe) || pe.Param != tc.param {
			t.Errorf("%s: err = %v, want a ParamError naming it", tc.param, err)
		}
	}
}
