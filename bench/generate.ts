/**
 * Decode speed of a preset model with random weights, on the best backend here (or --backend):
 * a prompt of --prompt tokens prefilled into a KV cache, then --tokens greedy steps of one token,
 * each reading its logits row back and taking the argmax on the host: generate's own step
 * (infer/generate.ts cachedStep) without the tokenizer, so every run decodes the same number of tokens. Beside
 * it, when python3 with torch exists, the same model in PyTorch (bench/torch_generate.py: eager,
 * a preallocated KV cache, scaled_dot_product_attention, the row read back each step) in fp32 with
 * TF32 off (as FON computes) and in bf16, on the same GPU in the same run.
 *
 *   node --import tsx bench/generate.ts [--preset small] [--prompt 128] [--tokens 128] [--backend auto] [--json FILE]
 */
import { parseArgs } from 'node:util';
import { initBackend, type BackendName } from '../src/backend/registry.ts';
import '../src/backend/webgpu/index.ts';
import '../src/backend/wasm/index.ts';
import { preset } from '../src/model/presets.ts';
import { Decoder } from '../src/model/decoder.ts';
import { ParamFactory } from '../src/nn/params.ts';
import { cachedStep, generationCache } from '../src/infer/generate.ts';
import { uniformArray } from '../src/ops/random.ts';
import { findPython, runPython, writeJson } from './lib/report.ts';

const { values: flags } = parseArgs({
  options: {
    preset: { type: 'string', default: 'small' }, prompt: { type: 'string', default: '128' }, tokens: { type: 'string', default: '128' },
    backend: { type: 'string', default: 'auto' }, json: { type: 'string' },
  },
});

const cfg = preset(flags.preset!);
const promptLen = Number(flags.prompt), tokens = Number(flags.tokens);
for (const [name, v] of [['--prompt', promptLen], ['--tokens', tokens]] as const) {
  if (!Number.isInteger(v) || v < 1) throw new Error(`${name} takes a whole number ≥ 1, got '${name === '--prompt' ? flags.prompt : flags.tokens}'`);
}
if (promptLen + tokens > cfg.contextLength) throw new Error(`--prompt ${promptLen} + --tokens ${tokens} passes the ${flags.preset} preset's context of ${cfg.contextLength} tokens`);
const backend = await initBackend(flags.backend as BackendName | 'auto');
const model = new Decoder(cfg, new ParamFactory({ backend, seed: 1 }));
const prompt = Array.from(uniformArray(7, promptLen), (u) => Math.floor(u * cfg.vocabSize));

/**
 * Prefill ms and decode ms a token for `n` new tokens, as generate runs them; hostMsPerToken: the
 * part of a step spent recording its work on the host, before the read-back is awaited.
 */
async function decode(n: number): Promise<{ prefillMs: number; msPerToken: number; hostMsPerToken: number }> {
  const cache = generationCache(model, promptLen + n);
  let host = 0;
  const step = (input: number[], pos: number) => {
    const h0 = performance.now();
    return cachedStep(model, cache, input, pos, () => { host += performance.now() - h0; });
  };
  const argmax = (row: Float32Array) => { let best = 0; for (let i = 1; i < row.length; i++) if (row[i] > row[best]) best = i; return best; };
  try {
    const t0 = performance.now();
    let row = await step(prompt, 0);
    const t1 = performance.now();
    host = 0;
    for (let i = 0; i < n; i++) row = await step([argmax(row)], promptLen + i);
    return { prefillMs: t1 - t0, msPerToken: (performance.now() - t1) / n, hostMsPerToken: host / n };
  } finally {
    cache.dispose();
  }
}

await decode(4); // warm-up: pipelines compile, the pool fills
const fon = await decode(tokens);
const fonTps = 1000 / fon.msPerToken;
console.log(`FON ${backend.name}: preset ${flags.preset} (${(model.parameterCount() / 1e6).toFixed(2)}M parameters), prompt ${promptLen}, ${tokens} new tokens: prefill ${fon.prefillMs.toFixed(1)} ms, ${fon.msPerToken.toFixed(2)} ms a token (${fon.hostMsPerToken.toFixed(2)} of it recording on the host), ${fonTps.toFixed(1)} tokens/s`);

const result: Record<string, unknown> = { preset: flags.preset, parameters: model.parameterCount(), prompt: promptLen, tokens, backend: backend.name, fon: { ...fon, tokensPerSecond: fonTps } };
const py = backend.name === 'webgpu' ? findPython('torch', ['python3', '/usr/bin/python3']) : null;
if (py) {
  const ref = runPython(py, 'bench/torch_generate.py', { config: cfg, prompt: promptLen, tokens }) as Record<string, { prefillMs: number; msPerToken: number; tokensPerSecond: number; device: string }> | null;
  if (ref) {
    result.pytorch = ref;
    for (const [name, r] of Object.entries(ref)) {
      console.log(`PyTorch ${name} (${r.device}): prefill ${r.prefillMs.toFixed(1)} ms, ${r.msPerToken.toFixed(2)} ms a token, ${r.tokensPerSecond.toFixed(1)} tokens/s; FON / PyTorch = ${(fonTps / r.tokensPerSecond).toFixed(3)}×`);
    }
  }
}
if (flags.json) writeJson(flags.json, result);
model.dispose();
process.exit(0);
