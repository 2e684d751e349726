package server

import (
	"testing"

	"github.com/ellm-dev/ellm/pkg/engine"
	"github.com/ellm-dev/ellm/pkg/kvcache"
	"github.com/ellm-dev/ellm/pkg/modelcfg"
)

// TestRealEnginePrefixDiskMetrics: with a prefix store memory that holds
// one long prompt and a disk tier, the agent pattern (one slot) sends one
// of the long prompt's blocks to disk and reads it back: the third request
// is cached but for its last token, and /metrics counts the blocks written
// and read.
func TestRealEnginePrefixDiskMetrics(t *testing.T) {
	cfg, err := modelcfg.Load(tinyModel(t))
	if err != nil {
		t.Fatal(err)
	}
	perPos, err := kvcache.BytesPerPosition(cfg, kvcache.BF16)
	if err != nil {
		t.Fatal(err)
	}
	// Memory for the long prompt and its reply (16 blocks), not more: the
	// other prompt's block pushes one of the long prompt's to disk.
	const block = 64
	e := tinyEngine(t, engine.Options{BatchSize: 1, PrefixBlockTokens: block, PrefixCacheBytes: 16 * block * perPos,
		PrefixCacheDir: t.TempDir(), PrefixCacheDiskBytes: -1})
	defer e.Close()
	_, base := startServer(t, e, Options{})
	prompt, cached := agentPattern(t, base)
	if prompt[0] < 10*block || cached[2] != prompt[2]-1 {
		t.Errorf("prompt tokens %v, cached %v: want the long prompt cached but for its last token", prompt, cached)
	}
	if w, r := num(t, base, "ellm_prefix_disk_written_blocks_total"), num(t, base, "ellm_prefix_disk_read_blocks_total"); w == 0 || r == 0 {
		t.Errorf("%v blocks written to disk, %v read back: want both", w, r)
	}
	if b, n := num(t, base, "ellm_prefix_disk_bytes"), num(t, base, "ellm_prefix_disk_blocks"); b <= 0 || n <= 0 || num(t, base, "ellm_prefix_disk_capacity_bytes") != 0 {
		t.Errorf("disk: %v bytes in %v blocks", b, n)
	}
}
