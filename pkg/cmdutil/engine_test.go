package cmdutil

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// TestByteLimitFlags: the byte-limit flags take sizes with units and the
// words auto / off / unbounded; the old numbers keep their meaning on the
// flags that had them; the engine gets its convention (0 = auto, -1 =
// off or unbounded).
func TestByteLimitFlags(t *testing.T) {
	for _, tt := range []struct {
		args              []string
		mem, disk         int64 // engine.Options' PrefixCacheBytes and PrefixCacheDiskBytes
		memText, diskText string
	}{
		{nil, 0, 0, "auto", "auto"},
		{[]string{"--prefix-cache-bytes=off"}, -1, 0, "off", "auto"},
		{[]string{"--prefix-cache-bytes=0"}, -1, 0, "off", "auto"},  // the old "none"
		{[]string{"--prefix-cache-bytes=-1"}, 0, 0, "auto", "auto"}, // the old default
		{[]string{"--prefix-cache-bytes=1048576"}, 1 << 20, 0, "1048576", "auto"},
		{[]string{"--prefix-cache-bytes=8GiB", "--prefix-cache-disk-bytes=unbounded"}, 8 << 30, -1, "8589934592", "unbounded"},
		{[]string{"--prefix-cache-bytes=1.5g", "--prefix-cache-disk-bytes=500 MB"}, 1.5e9, 5e8, "1500000000", "500000000"},
		{[]string{"--prefix-cache-disk-bytes=-1"}, 0, -1, "auto", "unbounded"}, // as --session-store-max-bytes
		{[]string{"--prefix-cache-disk-bytes=0"}, 0, 0, "auto", "auto"},
		{[]string{"--prefix-cache-disk-bytes=AUTO", "--prefix-cache-bytes=2Ki"}, 2048, 0, "2048", "auto"},
	} {
		var ef EngineFlags
		fl := pflag.NewFlagSet("t", pflag.ContinueOnError)
		ef.AddFlags(fl, 4096, "", 1, "")
		if err := fl.Parse(tt.args); err != nil {
			t.Fatalf("%v: %v", tt.args, err)
		}
		o := ef.Options()
		if o.PrefixCacheBytes != tt.mem || o.PrefixCacheDiskBytes != tt.disk {
			t.Errorf("%v: PrefixCacheBytes %d, PrefixCacheDiskBytes %d; want %d, %d", tt.args, o.PrefixCacheBytes, o.PrefixCacheDiskBytes, tt.mem, tt.disk)
		}
		if m, d := ef.PrefixCacheBytes.String(), ef.PrefixCacheDiskBytes.String(); m != tt.memText || d != tt.diskText {
			t.Errorf("%v: shown as %q, %q; want %q, %q", tt.args, m, d, tt.memText, tt.diskText)
		}
	}
	for _, tt := range []struct{ arg, want string }{
		{"--prefix-cache-bytes=unbounded", `"unbounded" is not a size`},
		{"--prefix-cache-disk-bytes=off", `"off" is not a size`},
		{"--prefix-cache-disk-bytes=0KiB", "at least one byte"},
		{"--prefix-cache-bytes=12XB", "is not a size"},
		{"--prefix-cache-bytes=-5", "is not a size"},
		{"--prefix-cache-bytes=99999999TiB", "too large"},
	} {
		var ef EngineFlags
		fl := pflag.NewFlagSet("t", pflag.ContinueOnError)
		ef.AddFlags(fl, 4096, "", 1, "")
		if err := fl.Parse([]string{tt.arg}); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want one containing %q", tt.arg, err, tt.want)
		}
	}
}
