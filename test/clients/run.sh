#!/usr/bin/env bash
# Runs real OpenAI-compatible clients (clients.test.mjs: the openai SDK, the
# Vercel AI SDK, LangChain; qwen-code.test.mjs: Qwen Code) against
# `ellm serve`. Everything runs in a network namespace of its own with only
# loopback, so no client can reach anything but the server on 127.0.0.1
# (SDKs and agents may try telemetry or update checks).
#
# Usage: test/clients/run.sh (after npm ci here and make build; make
# test-clients does all three). ELLM_BIN overrides the binary.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=${ELLM_BIN:-$here/../../bin/ellm}
shared=${ELLM_SHARED:-$here/../../../shared}
[ -x "$bin" ] || { echo "run.sh: $bin missing: make build first" >&2; exit 1; }
[ -d "$here/node_modules" ] || { echo "run.sh: node_modules missing: npm ci in $here first" >&2; exit 1; }
[ -f "$shared/models/tiny-qwen3-a/config.json" ] || { echo "run.sh: the shared tiny model is missing at $shared (set ELLM_SHARED)" >&2; exit 1; }
command -v unshare >/dev/null && command -v ip >/dev/null || { echo "run.sh: needs unshare and ip (util-linux, iproute2)" >&2; exit 1; }

if [ "${ELLM_CLIENTS_NETNS:-}" != 1 ]; then
	exec env ELLM_CLIENTS_NETNS=1 ELLM_BIN="$bin" ELLM_SHARED="$shared" unshare --net "$0" "$@"
fi
ip link set lo up

work=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

# serve NAME PORT ARGS...: starts ellm serve on 127.0.0.1:PORT and waits for /health.
serve() {
	local name=$1 port=$2
	shift 2
	"$bin" serve --host 127.0.0.1 --port "$port" --api-key test-key --threads 1 --weights-cache "$work/weights" "$@" >"$work/$name.log" 2>&1 &
	pids+=($!)
	for _ in $(seq 240); do
		if node -e "fetch('http://127.0.0.1:$port/health').then(r => process.exit(r.ok ? 0 : 1), () => process.exit(1))"; then
			return 0
		fi
		if ! kill -0 "${pids[-1]}" 2>/dev/null; then break; fi
		sleep 0.5
	done
	echo "run.sh: ellm serve ($name) did not become healthy:" >&2
	cat "$work/$name.log" >&2
	return 1
}

# The SDKs: the built-in synthetic model (byte tokenizer, tool-call template).
serve synthetic 18601 --sequence-length 4096 --batch-size 2
# Qwen Code: its prompt is ~15k Qwen3 tokens, so the shared tiny Qwen3 (real
# tokenizer and template) with room for it plus the 64k max_tokens it asks for
# when a reply is cut.
serve qwen 18602 --model-path "$shared/models/tiny-qwen3-a" --sequence-length 81920 --allow-long-context --batch-size 1

status=0
ELLM_BASE_URL=http://127.0.0.1:18601/v1 ELLM_MODEL=ellm-synthetic-tiny \
	ELLM_QWEN_BASE_URL=http://127.0.0.1:18602/v1 ELLM_QWEN_MODEL=tiny-qwen3-a \
	ELLM_API_KEY=test-key ELLM_QWEN_HOME="$work/home" \
	node --test --test-concurrency=1 --test-reporter=spec "$here"/*.test.mjs || status=$?
if [ $status -ne 0 ]; then
	for f in "$work"/*.log; do echo "== $f"; tail -n 40 "$f"; done >&2
fi
exit $status
