// Qwen Code (@qwen-code/qwen-code), Qwen's coding agent, run headless
// (`qwen -p`) against `ellm serve` on the shared tiny Qwen3 (run.sh starts
// it). Its first request carries ~15k tokens of system prompt and tool
// definitions, streamed with tools; the agent must finish without an API
// error, and every request it made must have succeeded.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { tmpdir } from "node:os";

const baseURL = process.env.ELLM_QWEN_BASE_URL;
const model = process.env.ELLM_QWEN_MODEL;
const apiKey = process.env.ELLM_API_KEY;
const home = process.env.ELLM_QWEN_HOME;
assert.ok(baseURL && model && apiKey && home, "run through run.sh");

async function metrics() {
  const r = await fetch(baseURL.replace(/\/v1$/, "/metrics"), { headers: { Authorization: `Bearer ${apiKey}` } });
  assert.equal(r.status, 200);
  const out = {};
  for (const line of (await r.text()).split("\n")) {
    const m = line.match(/^(ellm_[a-z_]+(?:\{[^}]*\})?) ([0-9.e+-]+)$/);
    if (m) out[m[1]] = Number(m[2]);
  }
  return out;
}

test("Qwen Code headless", async () => {
  // Settings: no usage statistics, telemetry or update checks (run.sh's
  // network namespace stops them anyway), and short replies: the tiny
  // model's words are noise and would run to the agent's 8k default.
  mkdirSync(join(home, ".qwen"), { recursive: true });
  writeFileSync(join(home, ".qwen", "settings.json"), JSON.stringify({
    privacy: { usageStatisticsEnabled: false },
    telemetry: { enabled: false },
    general: { enableAutoUpdate: false },
    model: { generationConfig: { samplingParams: { max_tokens: 48, temperature: 0 } } },
  }));
  const cli = createRequire(import.meta.url).resolve("@qwen-code/qwen-code/cli.js");
  const before = await metrics();
  const run = spawnSync(process.execPath, [cli, "-p", "Say hello in one word.", "--auth-type", "openai"], {
    cwd: mkdtempSync(join(tmpdir(), "qwen-")),
    env: { ...process.env, HOME: home, OPENAI_API_KEY: apiKey, OPENAI_BASE_URL: baseURL, OPENAI_MODEL: model, NO_COLOR: "1" },
    encoding: "utf8",
    timeout: 300_000,
  });
  const after = await metrics();
  const detail = `exit ${run.status}, signal ${run.signal}\nstdout: ${run.stdout}\nstderr: ${run.stderr?.slice(-2000)}`;
  assert.equal(run.status, 0, detail);
  assert.doesNotMatch(run.stdout, /API Error/, detail);
  // Requests by route ("POST /v1/chat/completions") and status.
  const delta = (pred) => Object.entries(after).filter(([k]) => k.startsWith("ellm_requests_total{") && pred(k))
    .reduce((n, [k, v]) => n + v - (before[k] ?? 0), 0);
  const ok = delta((k) => k.includes("/v1/chat/completions") && k.includes('status="200"'));
  assert.ok(ok >= 1, `no successful chat request\n${detail}`);
  assert.equal(delta((k) => !k.includes('status="200"')), 0, `failed requests\n${detail}`);
  const prompt = after.ellm_prompt_tokens_total - (before.ellm_prompt_tokens_total ?? 0);
  assert.ok(prompt >= 10000, `the agent's prompts had ${prompt} tokens, want its long system prompt`);
});
