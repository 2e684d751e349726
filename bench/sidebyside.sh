#!/bin/sh
# sidebyside.sh runs `ellm bench llamacpp` in the run kinds that
# docs/benchmarks.md reports, each one alone: on a machine of two cores any
# other process (a compile, a test, a second benchmark) moves both engines'
# timings, so each run waits for a one-minute load below 0.5 and then runs in
# a session (an autogroup) of its own at nice -15. A run's report, with the
# machine's ceilings and the other processes' CPU over it, goes to OUT/LABEL.txt.
#
# Usage: bench/sidebyside.sh OUT LABEL...
#   A LABEL names a run: the letter before its trailing digits is its kind
#   (A1, GA1 and ZA12 are all kind A). The kinds:
#     A  prefill 128, 512, 2048; decode at depths 0 and 4096          (--repeat 3)
#     N  prefill 512, 2048                                            (--repeat 3)
#     D  decode at depths 0 and 4096                                  (--repeat 3)
#     B  decode at depth 0 with 1, 2 and 4 sequences                  (--repeat 3)
#     K  int8 weights against Q8_0: prefill 512, 2048; depths 0, 4096 (--repeat 3)
#     T  a turn: prefill 128, 512 after 4096 tokens of history         (--repeat 3)
#     Q  prefill 8192                                                 (--repeat 1)
#     L  decode at depth 16384                                        (--repeat 1)
#     I  int8 K/V against llama.cpp's q8_0 cache: depths 4096, 16384  (--repeat 1)
# Environment (the defaults are docs/benchmarks.md's recipe):
#   ELLM       the ellm binary                     (bin/ellm)
#   HF         the Hugging Face checkpoint         (hf-0.6b)
#   GGUF_BF16  the same weights as bf16 GGUF       (qwen3-0.6b-bf16.gguf)
#   GGUF_Q8_0  the same weights as Q8_0 GGUF       (qwen3-0.6b-q8_0.gguf)
#   LLAMA_BIN  the directory of llama-bench and llama-batched-bench
#   IDLE_LOAD  the one-minute load a run waits to fall under  (0.5)
# One run set writes to OUT at a time: a second one started on it (by hand,
# or left behind by a shell that seemed to have died) would time the first
# one's runs and overwrite its reports, so it is refused.
set -eu

if [ $# -lt 2 ]; then
	sed -n '/^# Usage/,/^set -eu/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
	exit 2
fi
out=$1
shift
: "${ELLM:=bin/ellm}" "${HF:=hf-0.6b}" "${GGUF_BF16:=qwen3-0.6b-bf16.gguf}" "${GGUF_Q8_0:=qwen3-0.6b-q8_0.gguf}"
: "${LLAMA_BIN:?set LLAMA_BIN to the directory of llama-bench}" "${IDLE_LOAD:=0.5}"
mkdir -p "$out"
lock=$out/.sidebyside.lock
if ! mkdir "$lock" 2>/dev/null; then
	holder=$(cat "$lock/pid" 2>/dev/null || true)
	if [ -n "$holder" ] && kill -0 "$holder" 2>/dev/null; then
		echo "sidebyside.sh: $out is in use by run set $holder (sidebyside.sh pid); wait for it or stop it" >&2
		exit 2
	fi
	# Its run set is gone (killed before it could clean up): take the lock over.
fi
echo $$ >"$lock/pid"
trap 'rm -rf "$lock"' EXIT
trap 'exit 130' INT TERM
failed=0

for label in "$@"; do
	gguf=$GGUF_BF16
	case $(echo "$label" | sed 's/[0-9]*$//; s/.*\(.\)$/\1/') in
	A) args='--prefill 128,512,2048 --depths 0,4096 --repeat 3' ;;
	N) args='--prefill 512,2048 --depths "" --repeat 3' ;;
	D) args='--prefill "" --depths 0,4096 --repeat 3' ;;
	B) args='--prefill "" --depths 0 --batch 1,2,4 --repeat 3' ;;
	K) args='--dtype int8 --prefill 512,2048 --depths 0,4096 --repeat 3'; gguf=$GGUF_Q8_0 ;;
	T) args='--prefill 128,512 --prefill-depths 4096 --depths "" --repeat 3' ;;
	Q) args='--prefill 8192 --depths "" --repeat 1' ;;
	L) args='--prefill "" --depths 16384 --repeat 1' ;;
	I) args='--kv-dtype int8 --prefill "" --depths 4096,16384 --repeat 1' ;;
	*) echo "sidebyside.sh: $label: no such run kind" >&2; exit 2 ;;
	esac
	while awk -v idle="$IDLE_LOAD" '{ exit !($1 >= idle) }' /proc/loadavg; do sleep 15; done
	echo "$label: $(date -u +%H:%M:%S) load $(cut -d' ' -f1 /proc/loadavg): bench llamacpp $args" | tee "$out/$label.txt"
	# Raising the priority needs root; elsewhere nice says so and runs the command as it is.
	# A failed run is reported and the next one goes on; the exit status says whether any failed.
	if ! setsid nice -n -15 sh -c "echo -15 > /proc/self/autogroup 2>/dev/null; exec \"$ELLM\" bench llamacpp \
		--model-path \"$HF\" --gguf \"$gguf\" --llama-bench \"$LLAMA_BIN/llama-bench\" \
		--llama-batched-bench \"$LLAMA_BIN/llama-batched-bench\" $args" >>"$out/$label.txt" 2>&1 </dev/null; then
		echo "$label: failed; see $out/$label.txt" >&2
		failed=1
	fi
done
exit "$failed"
