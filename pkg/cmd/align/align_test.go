package align

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/ellm-dev/ellm/pkg/cmdutil"
	"github.com/ellm-dev/ellm/pkg/sharedtest"
)

func TestNewCmdAlign(t *testing.T) {
	auto := cmdutil.KernelFlags{Attention: "auto", CodedWeights: true}
	tests := []struct {
		argv    string
		want    Options
		wantErr bool
	}{
		{argv: "all", want: Options{Case: "all", Ref: DefaultRef, DType: "bf16", Positions: []int{4096, 32768}, KernelFlags: auto}},
		{argv: "all --attention-kernel f32", want: Options{Case: "all", Ref: DefaultRef, DType: "bf16", Positions: []int{4096, 32768},
			KernelFlags: cmdutil.KernelFlags{Attention: "f32", CodedWeights: true}}},
		{
			argv: "multi-token --ref /r --model-path /m --kernels generic --dtype int8 --json --dump /d --threads 2",
			want: Options{Case: "multi-token", Ref: "/r", ModelPath: "/m", Kernels: "generic", DType: "int8", JSON: true, Dump: "/d", Threads: 2,
				Positions: []int{4096, 32768}, KernelFlags: auto},
		},
		{argv: "kv-cache --kv-dtype int8 --positions 100,2000", want: Options{Case: "kv-cache", Ref: DefaultRef, DType: "bf16", KVDType: "int8", Positions: []int{100, 2000}, KernelFlags: auto}},
		{argv: "", wantErr: true},
		{argv: "rope rmsnorm", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.argv, func(t *testing.T) {
			var got *Options
			f := &cmdutil.Factory{IO: cmdutil.IOStreams{Out: &bytes.Buffer{}, ErrOut: &bytes.Buffer{}}}
			cmd := NewCmdAlign(f, func(o *Options) error { got = o; return nil })
			cmd.SetArgs(strings.Fields(tt.argv))
			cmd.SetOut(&bytes.Buffer{})
			cmd.SetErr(&bytes.Buffer{})
			err := cmd.Execute()
			if tt.wantErr {
				if err == nil {
					t.Fatal("no error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got.IO = cmdutil.IOStreams{}
			if !reflect.DeepEqual(*got, tt.want) {
				t.Errorf("options = %+v, want %+v", *got, tt.want)
			}
		})
	}
}

func TestAlignRun(t *testing.T) {
	ref := sharedtest.Path(t, "align", "tiny-qwen3-a", "rmsnorm")
	tests := []struct {
		name    string
		opts    Options
		wantOut string
		wantErr string
		exit    bool
	}{
		{name: "table", opts: Options{Case: "rmsnorm", Ref: ref, DType: "bf16", Kernels: "generic"}, wantOut: "fused_residual_out"},
		{name: "json", opts: Options{Case: "rmsnorm", Ref: ref, DType: "bf16", JSON: true}, wantOut: `"pass": true`},
		{name: "kind not in ref", opts: Options{Case: "rope", Ref: ref, DType: "bf16"}, wantErr: "no rope case"},
		{name: "bad kernels", opts: Options{Case: "rmsnorm", Ref: ref, DType: "bf16", Kernels: "neon"}, wantErr: "--kernels"},
		{name: "bad dtype", opts: Options{Case: "rmsnorm", Ref: ref, DType: "fp8"}, wantErr: "--dtype"},
		{name: "failing case exits 1", opts: Options{Case: "one-token", Ref: sharedtest.Path(t, "align", "tiny-qwen3-a", "one_token"),
			ModelPath: sharedtest.Path(t, "models", "tiny-qwen3moe-a"), DType: "bf16"}, wantOut: "FAIL", exit: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			tt.opts.IO = cmdutil.IOStreams{Out: &out, ErrOut: &out}
			err := alignRun(&tt.opts)
			var exit *cmdutil.ExitError
			switch {
			case tt.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			case tt.exit:
				if !errors.As(err, &exit) || exit.Code != 1 {
					t.Fatalf("err = %v, want exit status 1", err)
				}
			case err != nil:
				t.Fatal(err)
			}
			if !strings.Contains(out.String(), tt.wantOut) {
				t.Errorf("output lacks %q:\n%s", tt.wantOut, out.String())
			}
		})
	}
}
