#!/usr/bin/env python3
"""Reference dumps for `ellm align` from Hugging Face transformers on CPU.

Plain PyTorch + transformers: the model runs as transformers defines
Qwen3ForCausalLM / Qwen3MoeForCausalLM (eager attention), with forward hooks
on the embedding, every decoder layer, the final norm and the MoE routers.
Weights are loaded in float32 (bf16 checkpoints are upcast exactly), so every
op runs in float32; --bf16 adds the *_bf16 tensors and the bf16_engine
tolerances from a second run with torch_dtype=bfloat16.

    pip install torch transformers safetensors numpy
    python align/dumpers/hf_dump.py --model ../shared/models/tiny-qwen3-a --out /tmp/ref --bf16
    ellm align all --ref /tmp/ref/tiny-qwen3-a

Tensor names, shapes and the manifest follow ../shared/align/FORMAT.md.
"""

import argparse
import os

import numpy as np
import torch
import torch.nn.functional as F
from transformers import AutoModelForCausalLM, AutoTokenizer
from transformers.models.qwen3 import modeling_qwen3

import refformat as rf

GENERATED_BY = "align/dumpers/hf_dump.py (transformers %s, torch %s)"

DOCUMENT = (
    "The lighthouse at the end of the northern pier was built in 1887, and for most of its life it was "
    "tended by a single keeper who lived in the small stone cottage beside it. Every evening at dusk the "
    "keeper climbed the ninety-two steps of the spiral staircase, trimmed the wick, polished the lens and "
    "lit the lamp. " * 8
)

GREEDY_PROMPTS = [
    "The quick brown fox jumps over the lazy dog.",
    "Question: what is 17 times 23? Answer:",
    "def add(a, b):\n    return a + b\n",
]


class Tracer:
    """Forward hooks that keep the hidden state after the embedding, after
    each decoder layer and after the final norm, and each MoE gate's logits."""

    def __init__(self, model):
        inner = model.model
        self.hidden, self.router = {}, {}
        self.handles = [inner.embed_tokens.register_forward_hook(self._keep(0))]
        for i, layer in enumerate(inner.layers):
            self.handles.append(layer.register_forward_hook(self._keep(i + 1)))
            if hasattr(layer.mlp, "experts"):  # Qwen3MoeSparseMoeBlock: mlp.gate is the router
                self.handles.append(layer.mlp.gate.register_forward_hook(self._router(i)))
        self.handles.append(inner.norm.register_forward_hook(self._keep(len(inner.layers) + 1)))

    def _keep(self, stage):
        def hook(_module, _inputs, output):
            out = output[0] if isinstance(output, tuple) else output
            self.hidden[stage] = out.detach().float()[0].numpy()  # [T, H] of batch row 0
        return hook

    def _router(self, layer):
        def hook(_module, _inputs, output):
            # nn.Linear returns the logits; newer transformers' router modules
            # return (logits, weights, indices).
            logits = output[0] if isinstance(output, tuple) else output
            self.router[layer] = logits.detach().float().reshape(-1, logits.shape[-1]).numpy()
        return hook

    def stages(self):
        return np.stack([self.hidden[s] for s in sorted(self.hidden)])  # [L+2, T, H]

    def close(self):
        for h in self.handles:
            h.remove()


def route(logits, cfg):
    """Qwen3MoeSparseMoeBlock's routing: softmax in f32, top-k, optional renorm."""
    p = torch.softmax(torch.as_tensor(logits, dtype=torch.float32), dim=-1)
    w, sel = torch.topk(p, cfg.num_experts_per_tok, dim=-1)
    if cfg.norm_topk_prob:
        w = w / w.sum(dim=-1, keepdim=True)
    gap = torch.sort(p, dim=-1, descending=True).values
    k = cfg.num_experts_per_tok
    return sel.numpy(), w.numpy(), (gap[:, k - 1] - gap[:, k]).numpy()


def load(model_dir, dtype):
    m = AutoModelForCausalLM.from_pretrained(model_dir, torch_dtype=dtype, attn_implementation="eager")
    return m.eval()


@torch.no_grad()
def prefill(model, ids):
    """Logits [T, V], traced hidden states [L+2, T, H] and router logits {layer: [T, E]}."""
    tr = Tracer(model)
    try:
        logits = model(torch.tensor([ids])).logits[0].float().numpy()
        return logits, tr.stages(), dict(tr.router)
    finally:
        tr.close()


def margin(logits):
    top2 = np.sort(logits, axis=-1)[..., -2:]
    return top2[..., 1] - top2[..., 0]


class Dumper:
    def __init__(self, args):
        self.args = args
        self.name = os.path.basename(os.path.normpath(args.model))
        self.model = load(args.model, torch.float32)
        self.bf16 = load(args.model, torch.bfloat16) if args.bf16 else None
        self.cfg = self.model.config
        self.tok = AutoTokenizer.from_pretrained(args.tokenizer or args.model)
        self.doc = self.tok(DOCUMENT)["input_ids"]
        import transformers
        self.by = GENERATED_BY % (transformers.__version__, torch.__version__)
        self.rng = np.random.default_rng(args.seed)

    def case(self, kind, case, inputs):
        return rf.Case(self.args.out, self.name, self.args.model, kind, case, self.cfg.to_dict(), inputs, self.by)

    # ---- kernel cases ----------------------------------------------------

    def rope(self, case="rope", head_dim=None):
        hd = head_dim or self.cfg.head_dim
        nq, nkv = (self.cfg.num_attention_heads, self.cfg.num_key_value_heads) if head_dim is None else (16, 8)
        pos = [0, 1, 2, 3, 7, 15, 16, 100, 511, 1000, 2047, 4095, 4096, 8191, 10000, 16384, 32767, 40959]
        q = self.rng.standard_normal((len(pos), nq, hd)).astype(np.float32)
        k = self.rng.standard_normal((len(pos), nkv, hd)).astype(np.float32)
        theta = self.cfg.rope_theta
        # HF float32: inv_freq = 1/theta**(arange(0,d,2)/d), angle = f32(pos)·inv_freq
        inv = 1.0 / (theta ** (torch.arange(0, hd, 2, dtype=torch.int64).float() / hd))
        ang = torch.tensor(pos, dtype=torch.float32)[:, None] * inv[None, :]
        emb = torch.cat([ang, ang], dim=-1)
        cos, sin = emb.cos(), emb.sin()

        def apply(x, c, s):  # x [T, H, D]; rotate_half pairs (i, i+D/2)
            x = torch.as_tensor(x)
            return (x * c[:, None, :] + modeling_qwen3.rotate_half(x) * s[:, None, :]).numpy()

        ang64 = torch.tensor(pos, dtype=torch.float64)[:, None] / (theta ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
        emb64 = torch.cat([ang64, ang64], dim=-1)
        c = self.case("rope", case, {"description": "random q,k; neox rotate_half style", "rope_theta": theta,
                                     "head_dim": hd, "n_q_heads": nq, "n_kv_heads": nkv, "positions": pos})
        c.add("positions", np.array(pos), "[T] absolute positions")
        c.add("q", q, "[T, n_q_heads, head_dim] input (random normal)")
        c.add("k", k, "[T, n_kv_heads, head_dim] input")
        c.add("q_out", apply(q, cos, sin), "[T, n_q, hd] HF-faithful float32 rope (reference)")
        c.add("k_out", apply(k, cos, sin), "[T, n_kv, hd] HF-faithful float32 rope (reference)")
        c.add("q_out_exact", apply(torch.tensor(q, dtype=torch.float64), emb64.cos(), emb64.sin()), "float64 angles")
        c.add("k_out_exact", apply(torch.tensor(k, dtype=torch.float64), emb64.cos(), emb64.sin()), "float64 angles")
        c.add("cos", cos.numpy(), "[T, hd] HF cos table")
        c.add("sin", sin.numpy(), "[T, hd] HF sin table")
        c.add("inv_freq", inv.numpy(), "[hd/2] float32 inv_freq")
        c.write(tolerances={"vs_q_out_max_abs_small_pos(<=4096)": 1e-5, "vs_q_out_max_abs_any_pos": 2e-5,
                            "vs_q_out_exact_max_abs_any_pos": float(np.abs(apply(q, cos, sin) - apply(torch.tensor(q, dtype=torch.float64), emb64.cos(), emb64.sin())).max() * 2)})

    def silu_and_mul(self):
        inter = self.cfg.moe_intermediate_size if getattr(self.cfg, "num_experts", 0) else self.cfg.intermediate_size
        x = self.rng.standard_normal((9, 2 * inter)).astype(np.float32)
        x[0, :inter] = np.linspace(-100, 100, inter)  # extreme gates
        x[1] *= 10
        x[2] *= 1e-3
        t = torch.tensor(x)
        out = (F.silu(t[:, :inter]) * t[:, inter:]).numpy()
        t64 = t.double()
        exact = (F.silu(t64[:, :inter]) * t64[:, inter:]).numpy()
        c = self.case("silu_and_mul", "silu_and_mul", {"T": 9, "I": inter})
        c.add("x", x, "[T, 2*I] input; first half = gate, second half = up")
        c.add("out", out, "[T, I] = silu(x[:, :I]) * x[:, I:] in float32 (torch)")
        c.add("out_exact", exact, "same in float64")
        c.write(tolerances={"out_max_rel": 1e-5, "note": "compare |a-b| <= 1e-5 * max(1, |ref|)"})

    @torch.no_grad()
    def rmsnorm(self):
        layer = self.model.model.layers[0]
        norm, qn = layer.input_layernorm, layer.self_attn.q_norm
        H, T = self.cfg.hidden_size, 8
        x = self.rng.standard_normal((T, H)).astype(np.float32)
        x[1] *= 100
        x[2] *= 1e-3
        x[3] = 0.5
        x[4] = 0
        x[4, 7] = 30
        x[5] *= 1e-5
        res = self.rng.standard_normal((T, H)).astype(np.float32)
        fx = self.rng.standard_normal((T, H)).astype(np.float32)
        hx = self.rng.standard_normal((T, self.cfg.num_attention_heads, self.cfg.head_dim)).astype(np.float32)
        w64, x64 = norm.weight.double(), torch.tensor(x, dtype=torch.float64)
        exact = (w64 * x64 / torch.sqrt((x64 * x64).mean(-1, keepdim=True) + norm.variance_epsilon)).numpy()
        fres = torch.tensor(res) + torch.tensor(fx)
        c = self.case("rmsnorm", "rmsnorm", {"description": "RMSNorm unit test", "eps": norm.variance_epsilon, "H": H, "T": T})
        c.add("x", x, "[T, H] input rows")
        c.add("weight", norm.weight.float().numpy(), "[H] = model.layers.0.input_layernorm.weight")
        c.add("out", norm(torch.tensor(x)).numpy(), "[T, H] float32")
        c.add("out_exact", exact, "same in float64")
        c.add("fused_residual_in", res, "[T, H] residual")
        c.add("fused_x", fx, "[T, H] block output")
        c.add("fused_residual_out", fres.numpy(), "[T, H] residual + x")
        c.add("fused_out", norm(fres).numpy(), "[T, H] rmsnorm(residual + x)")
        c.add("head_x", hx, "[T, n_q_heads, head_dim] per-head input")
        c.add("head_weight", qn.weight.float().numpy(), "[head_dim] q_norm weight layer 0")
        c.add("head_out", qn(torch.tensor(hx)).numpy(), "[T, n_q, hd] per-head RMSNorm (Qwen3 q_norm)")
        c.write(tolerances={"out_max_abs": 1e-5, "note": "relative 1e-5 for rows of large magnitude"})

    # ---- model cases -----------------------------------------------------

    def tolerances(self, ref, bf16):
        t = {"fp32_engine": rf.FP32_ENGINE}
        extra = {}
        if bf16 is not None:
            s = rf.spread(ref, bf16)
            t["bf16_engine"] = rf.bf16_engine_tolerances(s)
            extra["bf16_vs_fp32"] = s
        return t, extra

    def add_router(self, c, router, T):
        if not router:
            return
        sel, w, gaps = zip(*(route(router[l], self.cfg) for l in sorted(router)))
        c.add("router_logits", np.stack([router[l] for l in sorted(router)]).reshape(len(router), T, -1), "[L, T, E]")
        c.add("router_selected", np.stack(sel), "[L, T, top_k] expert ids (torch.topk order)")
        c.add("router_weights", np.stack(w), "[L, T, top_k] routing weights")
        c.add("router_min_gap_per_position", np.stack(gaps).min(0), "[T] min over layers of p_(k) - p_(k+1)")

    def one_token(self):
        ids = self.tok("Hello")["input_ids"][:1]
        logits, hidden, router = prefill(self.model, ids)
        c = self.case("one_token", "one_token", {"description": "single token at position 0", "token_ids": ids, "positions": [0]})
        c.add("token_ids", np.array(ids), "[1]")
        c.add("logits", logits[0], "[V] float32 reference")
        c.add("hidden", hidden[:, 0], "[L+2, H]: embedding, after each decoder layer, after the final norm")
        self.add_router(c, router, 1)
        bf = None
        if self.bf16 is not None:
            bf = prefill(self.bf16, ids)[0][0]
            c.add("logits_bf16", bf, "[V] bf16-compute variant")
        tol, extra = self.tolerances(logits[0], bf)
        c.write(tolerances=tol, **extra)

    def multi_token(self, T):
        ids = self.doc[:T]
        logits, hidden, router = prefill(self.model, ids)
        rows = rf.trim_rows(T)
        c = self.case("multi_token", "multi_token_T%d" % T, {"description": "prefill of the first %d tokens" % T, "token_ids": ids, "T": T})
        c.add("token_ids", np.array(ids), "[T] prompt ids (positions 0..T-1)")
        c.add_rows("logits", logits, rows, "[T, V] float32 reference")
        c.add("hidden_last", hidden[:, -1], "[L+2, H] last position")
        c.add("hidden_all", hidden, "[L+2, T, H] every position")
        c.add("logits_top2_margin", margin(logits), "[T] top1 - top2 of the reference logits")
        self.add_router(c, router, T)
        bf = None
        if self.bf16 is not None:
            bf = prefill(self.bf16, ids)[0]
            c.add_rows("logits_bf16", bf, [T - 1], "[T, V] bf16-compute variant")
        tol, extra = self.tolerances(logits, bf)
        c.write(tolerances=tol, **extra)

    def multi_batch(self):
        spans = [(0, 3), (40, 17), (100, 64), (200, 129)]
        prompts = [self.doc[o:o + n] for o, n in spans]
        last = np.stack([prefill(self.model, p)[0][-1] for p in prompts])
        c = self.case("multi_batch", "multi_batch", {"description": "independent prompts, each at positions 0..len-1",
                                                      "prompts": prompts, "lengths": [n for _, n in spans]})
        c.add("token_ids", np.concatenate(prompts), "[sum(lengths)] the prompts concatenated")
        c.add("lengths", np.array([len(p) for p in prompts]), "[B]")
        c.add("offsets", np.cumsum([0] + [len(p) for p in prompts[:-1]]), "[B] start of each prompt in token_ids")
        c.add("last_logits", last, "[B, V] last-position logits, each prompt run alone")
        bf = None
        if self.bf16 is not None:
            bf = np.stack([prefill(self.bf16, p)[0][-1] for p in prompts])
        tol, extra = self.tolerances(last, bf)
        c.write(tolerances=tol, **extra)

    @torch.no_grad()
    def greedy(self, prompt, n):
        """Greedy decoding with the KV cache: ids, margins, top-5 ids and logits per step."""
        out = self.model(torch.tensor([prompt]), use_cache=True)
        past, ids, margins, top_ids, top_logits = out.past_key_values, [], [], [], []
        logits = out.logits[0, -1].float()
        for _ in range(n):
            v, i = torch.topk(logits, 5)  # ties: torch.topk; argmax below takes the first index
            nxt = int(torch.argmax(logits))
            ids.append(nxt)
            margins.append(float(v[0] - v[1]))
            top_ids.append(i.numpy())
            top_logits.append(v.numpy())
            out = self.model(torch.tensor([[nxt]]), past_key_values=past, use_cache=True)
            past, logits = out.past_key_values, out.logits[0, -1].float()
        return ids, margins, top_ids, top_logits

    def multi_batch_test(self, n=16):
        chat = self.tok.apply_chat_template([{"role": "user", "content": "Name three colours of the rainbow."}],
                                            add_generation_prompt=True, tokenize=False)
        prompts = [self.tok(t)["input_ids"] for t in GREEDY_PROMPTS + [chat]]
        runs = [self.greedy(p, n) for p in prompts]
        c = self.case("multi_batch_test", "multi_batch_test", {"description": "greedy decoding, no EOS stop",
                                                                "prompts": prompts, "n_new": n})
        c.add("prompt_ids", np.concatenate(prompts), "[sum(lengths)] concatenated prompts")
        c.add("prompt_lengths", np.array([len(p) for p in prompts]), "[B]")
        c.add("prompt_offsets", np.cumsum([0] + [len(p) for p in prompts[:-1]]), "[B]")
        c.add("new_ids", np.array([r[0] for r in runs]), "[B, N] greedy continuation (first index on ties)")
        c.add("margins", np.array([r[1] for r in runs]), "[B, N] top1 - top2 logit at each step")
        c.add("step_top5_ids", np.array([r[2] for r in runs]), "[B, N, 5]")
        c.add("step_top5_logits", np.array([r[3] for r in runs]), "[B, N, 5]")
        c.write(tolerances={"fp32_engine": {"new_ids_exact_match_until": "first step whose margin < 2e-3"},
                            "bf16_engine": {"new_ids_exact_match_until": "first step with margin < 0.1"}})

    @torch.no_grad()
    def incremental(self, a=50, b=20):
        ids = self.doc[:a + b]
        first = self.model(torch.tensor([ids[:a]]), use_cache=True)
        inc = self.model(torch.tensor([ids[a:]]), past_key_values=first.past_key_values, use_cache=True).logits[0].float().numpy()
        full = self.model(torch.tensor([ids])).logits[0, a:].float().numpy()
        rows = rf.trim_rows(b)
        c = self.case("incremental", "incremental", {"description": "prefill A, then B more reusing the KV cache",
                                                      "A": a, "B": b, "token_ids": ids})
        c.add("token_ids", np.array(ids), "[A+B] = prompt A + appended chunk")
        c.add("logits_prefill_A_last", first.logits[0, -1].float().numpy(), "[V] last logits after prefilling A")
        c.add_rows("logits_incremental", inc, rows, "[B, V] logits of the appended positions with the KV cache of A")
        c.add_rows("logits_full", full, rows, "[B, V] the same positions from one full prefill")
        c.add("last_logits_incremental", inc[-1], "[V]")
        c.add("last_logits_full", full[-1], "[V]")
        c.write(tolerances={"fp32_engine": rf.FP32_ENGINE}, incremental_vs_full_fp32=rf.spread(full, inc))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="Hugging Face model directory")
    ap.add_argument("--tokenizer", help="tokenizer directory (default: the model's)")
    ap.add_argument("--out", required=True, help="output root: cases go to OUT/<model>/<case>/")
    ap.add_argument("--bf16", action="store_true", help="also run in bfloat16 for *_bf16 tensors and bf16_engine tolerances")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    torch.manual_seed(args.seed)
    d = Dumper(args)
    d.rope()
    d.rope("rope_hd128", head_dim=128)
    d.silu_and_mul()
    d.rmsnorm()
    d.one_token()
    for t in (7, 64, 300):
        d.multi_token(t)
    d.multi_batch()
    d.multi_batch_test()
    d.incremental()


if __name__ == "__main__":
    main()
