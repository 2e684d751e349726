"""Writer for ellm's alignment reference format (../shared/align/FORMAT.md).

A case is a directory holding manifest.json and tensors.safetensors (F32 and
I32 only). `ellm align CASE --ref DIR` reads what this module writes; the Go
test align/fixture_test.go writes the same layout to prove the round trip.
"""

import json
import os
import time

import numpy as np
from safetensors.numpy import save_file

# FORMAT.md: f32 engines must match the f32 reference this closely.
FP32_ENGINE = {
    "logits_max_abs": 2e-3,
    "logits_cosine_min": 0.999999,
    "argmax_must_match": True,
    "hidden_max_abs": 1e-3,
}


def trim_rows(n):
    """Rows kept of an [n, V] tensor: 0, n/2, n-2, n-1 (deduplicated, sorted)."""
    return sorted({r for r in (0, n // 2, n - 2, n - 1) if 0 <= r < n})


def spread(a, b):
    """Statistics of b against the reference a (both [..., V] float arrays)."""
    a = np.asarray(a, np.float64).reshape(-1, np.shape(a)[-1])
    b = np.asarray(b, np.float64).reshape(-1, np.shape(b)[-1])
    d = np.abs(a - b)
    cos = (a * b).sum(1) / np.sqrt((a * a).sum(1) * (b * b).sum(1))
    return {
        "max_abs": float(d.max()),
        "mean_abs": float(d.mean()),
        "max_rel_to_ref_absmax": float(d.max() / np.abs(a).max()),
        "cosine_min": float(cos.min()),
        "cosine_mean": float(cos.mean()),
        "argmax_agree_frac": float((a.argmax(1) == b.argmax(1)).mean()),
    }


def bf16_engine_tolerances(s):
    """The bf16_engine set: 3x the observed bf16-vs-fp32 spread of the case."""
    return {
        "logits_max_abs": 3 * s["max_abs"],
        "logits_cosine_min": 1 - 3 * (1 - s["cosine_min"]),
        "logits_mean_abs_max": 3 * s["mean_abs"],
        "argmax_must_match": False,
        "note": "derived as 3x the observed bf16-vs-fp32 spread of this case (bf16_vs_fp32 field)",
    }


class Case:
    """Collects one case's tensors and writes <root>/<model>/<case>/."""

    def __init__(self, root, model_name, model_dir, kind, case, config, inputs, generated_by):
        self.dir = os.path.join(root, model_name, case)
        self.manifest = {
            "case": case,
            "kind": kind,
            "model": model_name,
            "model_config": config,
            "inputs": inputs,
            "tensors": {},
            "tolerances": {},
            "generated_by": generated_by,
            "generated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            # relative to the case directory, as FORMAT.md requires
            "model_path": os.path.relpath(model_dir, self.dir) if model_dir else None,
        }
        self.tensors = {}

    def add(self, name, array, description):
        """Adds a tensor: integers are stored as I32, everything else as F32."""
        a = np.asarray(array)
        a = np.ascontiguousarray(a.astype(np.int32 if np.issubdtype(a.dtype, np.integer) else np.float32))
        self.tensors[name] = a
        self.manifest["tensors"][name] = {
            "dtype": "I32" if a.dtype == np.int32 else "F32",
            "shape": list(a.shape),
            "description": description,
        }

    def add_rows(self, name, array, rows, description):
        """Adds the rows `rows` of an [N, V] tensor and their indices as <name>_positions."""
        a = np.asarray(array)
        self.add(name, a[rows], description + " -- trimmed to rows " + name + "_positions")
        self.add(name + "_positions", np.asarray(rows), "row indices (into the original %d rows) kept in %s" % (a.shape[0], name))

    def write(self, **extra):
        self.manifest.update(extra)
        os.makedirs(self.dir, exist_ok=True)
        save_file(self.tensors, os.path.join(self.dir, "tensors.safetensors"))
        with open(os.path.join(self.dir, "manifest.json"), "w") as f:
            json.dump(self.manifest, f, indent=1)
            f.write("\n")
        print("wrote", self.dir)
