#!/usr/bin/env python3
"""Reference dumps for `ellm align` from SGLang's CPU backend.

Kernel cases run sgl_kernel's CPU operators on the same inputs as a
reference case written by hf_dump.py (--inputs), so the two references can be
compared with each other and with ellm:

    rope          torch.ops.sgl_kernel.rotary_embedding_cpu(positions, q, k, head_size, cos_sin_cache, is_neox=True)
    silu_and_mul  torch.ops.sgl_kernel.silu_and_mul_cpu(x)
    rmsnorm       torch.ops.sgl_kernel.rmsnorm_cpu(x, w, eps), fused_add_rmsnorm_cpu(x, residual, w, eps)

Model cases run the model through sglang.Engine on CPU with
enable_return_hidden_states: the final-norm hidden state of every position is
returned, and the logits are that times lm_head (tied or not) in float32;
greedy decoding uses the engine's own sampler with top-5 logprobs (logprob
differences are logit differences, so margins and "within 2e-3 of the top"
are exact).

    pip install "sglang[srt]" sgl-kernel  # CPU build: see SGLang's CPU docs
    python align/dumpers/sglang_dump.py --model ../shared/models/tiny-qwen3-a \
        --inputs ../shared/align/tiny-qwen3-a --out /tmp/sgl
    ellm align all --ref /tmp/sgl/tiny-qwen3-a

sgl_kernel's CPU operators take bfloat16 (and some float32) tensors; the
dtype each case ran in is recorded in its manifest's dtype_notes, and a
bf16 case should be read with the bf16_engine tolerances.
"""

import argparse
import json
import os

import numpy as np
import torch
from safetensors import safe_open
from safetensors.numpy import load_file

import refformat as rf

GENERATED_BY = "align/dumpers/sglang_dump.py (sglang %s, sgl_kernel CPU ops)"


def sgl_ops():
    import sgl_kernel  # noqa: F401  registers torch.ops.sgl_kernel
    return torch.ops.sgl_kernel


def read_case(root, case):
    d = os.path.join(root, case)
    with open(os.path.join(d, "manifest.json")) as f:
        return json.load(f), load_file(os.path.join(d, "tensors.safetensors"))


def run_op(op, dtype, *tensors):
    """Runs op on tensors converted to dtype, falling back to bfloat16 when
    the CPU kernel rejects float32. Returns the outputs as float32 numpy and the dtype used."""
    for dt in (dtype, torch.bfloat16):
        try:
            args = [torch.as_tensor(t).to(dt) if isinstance(t, (np.ndarray, torch.Tensor)) else t for t in tensors]
            return op(*args), dt
        except RuntimeError:
            if dt == torch.bfloat16:
                raise
    raise AssertionError("unreachable")


class Dumper:
    def __init__(self, args):
        import sglang
        self.args = args
        self.name = os.path.basename(os.path.normpath(args.model))
        self.by = GENERATED_BY % sglang.__version__
        with open(os.path.join(args.model, "config.json")) as f:
            self.cfg = json.load(f)

    def case(self, manifest, inputs=None):
        return rf.Case(self.args.out, self.name, self.args.model, manifest["kind"], manifest["case"], self.cfg,
                       inputs if inputs is not None else manifest["inputs"], self.by)

    def rope(self, case):
        ops = sgl_ops()
        m, t = read_case(self.args.inputs, case)
        hd, theta = m["inputs"]["head_dim"], m["inputs"]["rope_theta"]
        pos = torch.as_tensor(t["positions"]).long()
        inv = 1.0 / (theta ** (torch.arange(0, hd, 2, dtype=torch.int64).float() / hd))
        ang = torch.arange(int(pos.max()) + 1, dtype=torch.float32)[:, None] * inv[None, :]
        cache = torch.cat([ang.cos(), ang.sin()], dim=-1)  # [max_pos, hd]: cos half ‖ sin half
        T = len(pos)
        q = torch.as_tensor(t["q"]).reshape(T, -1)
        k = torch.as_tensor(t["k"]).reshape(T, -1)
        (qo, ko), dt = run_op(lambda q_, k_, c_: ops.rotary_embedding_cpu(pos, q_, k_, hd, c_, True),
                              torch.float32, q, k, cache)
        c = self.case(m)
        for name in ("positions", "q", "k"):
            c.add(name, t[name], m["tensors"][name]["description"])
        c.add("q_out", qo.float().reshape(t["q"].shape).numpy(), "sgl_kernel rotary_embedding_cpu")
        c.add("k_out", ko.float().reshape(t["k"].shape).numpy(), "sgl_kernel rotary_embedding_cpu")
        c.add("q_out_exact", t["q_out_exact"], "float64 angles (from the input case)")
        c.add("k_out_exact", t["k_out_exact"], "float64 angles (from the input case)")
        c.write(tolerances=m["tolerances"], dtype_notes="sgl_kernel ran in %s" % dt)

    def silu_and_mul(self, case="silu_and_mul"):
        ops = sgl_ops()
        m, t = read_case(self.args.inputs, case)
        out, dt = run_op(ops.silu_and_mul_cpu, torch.float32, t["x"])
        c = self.case(m)
        c.add("x", t["x"], "[T, 2*I] input")
        c.add("out", out.float().numpy(), "sgl_kernel silu_and_mul_cpu")
        c.add("out_exact", t["out_exact"], "float64 (from the input case)")
        c.write(tolerances=m["tolerances"], dtype_notes="sgl_kernel ran in %s" % dt)

    def rmsnorm(self, case="rmsnorm"):
        ops = sgl_ops()
        m, t = read_case(self.args.inputs, case)
        eps = m["inputs"]["eps"]
        out, dt = run_op(lambda x, w: ops.rmsnorm_cpu(x, w, eps), torch.float32, t["x"], t["weight"])
        x, res = torch.as_tensor(t["fused_x"]).to(dt).clone(), torch.as_tensor(t["fused_residual_in"]).to(dt).clone()
        ops.fused_add_rmsnorm_cpu(x, res, torch.as_tensor(t["weight"]).to(dt), eps)  # res += x; x = rmsnorm(res)
        hx = torch.as_tensor(t["head_x"])
        head, _ = run_op(lambda h, w: ops.rmsnorm_cpu(h, w, eps), dt, hx.reshape(-1, hx.shape[-1]).numpy(), t["head_weight"])
        c = self.case(m)
        for name in ("x", "weight", "fused_x", "fused_residual_in", "head_x", "head_weight", "out_exact"):
            c.add(name, t[name], m["tensors"][name]["description"])
        c.add("out", out.float().numpy(), "sgl_kernel rmsnorm_cpu")
        c.add("fused_residual_out", res.float().numpy(), "sgl_kernel fused_add_rmsnorm_cpu residual")
        c.add("fused_out", x.float().numpy(), "sgl_kernel fused_add_rmsnorm_cpu output")
        c.add("head_out", head.float().reshape(hx.shape).numpy(), "sgl_kernel rmsnorm_cpu per head")
        c.write(tolerances=m["tolerances"], dtype_notes="sgl_kernel ran in %s" % dt)

    # ---- model cases through sglang.Engine --------------------------------

    def engine(self):
        import sglang
        return sglang.Engine(model_path=self.args.model, device="cpu", dtype=self.args.dtype,
                             enable_return_hidden_states=True, disable_radix_cache=True, skip_tokenizer_init=True)

    def lm_head(self):
        name = "model.embed_tokens.weight" if self.cfg.get("tie_word_embeddings") else "lm_head.weight"
        path = os.path.join(self.args.model, "model.safetensors")
        with safe_open(path, framework="pt") as f:
            return f.get_tensor(name).float()

    def multi_token(self, eng, head, case):
        m, t = read_case(self.args.inputs, case)
        ids = [int(i) for i in t["token_ids"]]
        out = eng.generate(input_ids=ids, sampling_params={"max_new_tokens": 1, "temperature": 0}, return_hidden_states=True)
        hidden = torch.tensor(out["meta_info"]["hidden_states"][0], dtype=torch.float32).reshape(len(ids), -1)
        logits = (hidden @ head.T).numpy()  # [T, V]
        c = self.case(m)
        c.add("token_ids", t["token_ids"], "[T] prompt ids")
        c.add_rows("logits", logits, [int(r) for r in t["logits_positions"]], "[T, V] sglang final hidden state × lm_head")
        c.write(tolerances=m["tolerances"], dtype_notes="sglang ran in %s" % self.args.dtype)

    def multi_batch_test(self, eng, case="multi_batch_test"):
        m, t = read_case(self.args.inputs, case)
        n = int(t["new_ids"].shape[1])
        lengths, offsets = t["prompt_lengths"], t["prompt_offsets"]
        prompts = [[int(x) for x in t["prompt_ids"][o:o + l]] for o, l in zip(offsets, lengths)]
        outs = eng.generate(input_ids=prompts, sampling_params={"max_new_tokens": n, "min_new_tokens": n, "temperature": 0,
                                                                 "ignore_eos": True},
                            return_logprob=True, top_logprobs_num=5)
        ids, margins, top_ids, top_lp = [], [], [], []
        for o in outs:
            steps = o["meta_info"]["output_top_logprobs"]  # per step: [(logprob, id, text), ...]
            ids.append([s[0][1] for s in steps])
            margins.append([s[0][0] - s[1][0] for s in steps])
            top_ids.append([[e[1] for e in s] for s in steps])
            top_lp.append([[e[0] for e in s] for s in steps])
        c = self.case(m)
        for name in ("prompt_ids", "prompt_lengths", "prompt_offsets"):
            c.add(name, t[name], m["tensors"][name]["description"])
        c.add("new_ids", np.array(ids), "[B, N] sglang greedy (batched)")
        c.add("margins", np.array(margins), "[B, N] top1 - top2 (logprob differences = logit differences)")
        c.add("step_top5_ids", np.array(top_ids), "[B, N, 5]")
        c.add("step_top5_logits", np.array(top_lp), "[B, N, 5] logprobs: only differences are meaningful")
        c.write(tolerances=m["tolerances"], dtype_notes="sglang ran in %s" % self.args.dtype)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="Hugging Face model directory")
    ap.add_argument("--inputs", required=True, help="reference cases of this model (e.g. ../shared/align/tiny-qwen3-a): inputs are reused")
    ap.add_argument("--out", required=True, help="output root: cases go to OUT/<model>/<case>/")
    ap.add_argument("--dtype", default="float32", help="sglang model dtype (float32 or bfloat16)")
    args = ap.parse_args()
    d = Dumper(args)
    d.rope("rope")
    d.rope("rope_hd128")
    d.silu_and_mul()
    d.rmsnorm()
    eng = d.engine()
    try:
        head = d.lm_head()
        for case in ("multi_token_T7", "multi_token_T64", "multi_token_T300"):
            d.multi_token(eng, head, case)
        d.multi_batch_test(eng)
    finally:
        eng.shutdown()


if __name__ == "__main__":
    main()
