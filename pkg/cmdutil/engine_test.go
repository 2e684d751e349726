package cmdutil

import (
	"testing"

	"github.com/spf13/pflag"
)

func TestPrefixCacheBytesFlag(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want int64 // engine.Options.PrefixCacheBytes
	}{
		{nil, 0},                                 // default: the engine sizes it
		{[]string{"--prefix-cache-bytes=0"}, -1}, // none
		{[]string{"--prefix-cache-bytes=1048576"}, 1 << 20},
	} {
		var ef EngineFlags
		fl := pflag.NewFlagSet("t", pflag.ContinueOnError)
		ef.AddFlags(fl, 4096, "", 1, "")
		if err := fl.Parse(tt.args); err != nil {
			t.Fatal(err)
		}
		if got := ef.Options().PrefixCacheBytes; got != tt.want {
			t.Errorf("%v: Options().PrefixCacheBytes = %d, want %d", tt.args, got, tt.want)
		}
	}
}
