/**
 * Issue 4's closing check, FON side: writes Hugging Face folders with FON's exporter and what FON
 * computes from them, for dev/hf/export_check.py to load with transformers' `from_pretrained` and
 * compare. Two kinds of folders:
 *
 *   fixture-<arch>   each transformers-made fixture of test/fixtures/hf loaded by FON and exported
 *                    again (gpt2, llama, mistral, qwen2, qwen3)
 *   trained-<style>  a model trained by `fon train` (a few steps on the Brown Corpus with a BPE
 *                    tokenizer trained by FON) and exported with `fon export`: Llama style (GQA,
 *                    untied) and Qwen3 style (QK-norm, GQA, tied, head_dim ≠ width / heads)
 *
 * Beside each folder, <folder>.fon.json holds FON's answers (the logits in <folder>.fon.f32): the logits of the first positions of
 * test/fixtures/hf/eval.txt (loaded back from the exported folder), the greedy continuation of a
 * prompt (ids given to transformers as they are, start token included), and the tokenizer's ids for
 * hard strings, added tokens matched in the text as the tokenizers library does (compared with
 * AutoTokenizer, no special tokens added).
 *
 *   node --import tsx dev/hf/export_check.ts --out /tmp/fon-export-check      # here, CPU, ~1 min
 *   python3 dev/hf/export_check.py /tmp/fon-export-check                         # where transformers is
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import * as fon from '../../src/index.ts';
import { exportHf } from '../../src/io/hf/export.ts';
import { loadModel } from '../../src/io/model_checkpoint.ts';
import { generate } from '../../src/infer/generate.ts';

const { values: flags } = parseArgs({ options: { out: { type: 'string', default: '/tmp/fon-export-check' }, steps: { type: 'string', default: '30' } } });
const OUT = flags.out!;
const ROOT = 'test/fixtures/hf';
const EVAL_TEXT = readFileSync(join(ROOT, 'eval.txt'), 'utf8');
const HARD: string[] = JSON.parse(readFileSync(join(ROOT, 'llama', 'tokenizer_reference.json'), 'utf8')).strings;
const PROMPT = 'The jury said that the city';
const cpu = await fon.initBackend('cpu');
rmSync(OUT, { recursive: true, force: true });
mkdirSync(OUT, { recursive: true });

function fonCli(args: string[]): void {
  console.log(`$ fon ${args.join(' ')}`);
  const r = spawnSync(process.execPath, ['bin/fon.js', ...args], { stdio: 'inherit' });
  if (r.status !== 0) throw new Error(`fon ${args[0]} exited with ${r.status}`);
}

/** FON's answers for the exported folder `dir`, loaded back by FON's own loader. */
async function answers(dir: string): Promise<void> {
  const { model, tokenizer } = await loadModel(dir, cpu);
  const ids = tokenizer.encode(EVAL_TEXT).slice(0, 64);
  const x = fon.tensor(Int32Array.from(ids), [1, ids.length], { backend: cpu, dtype: 'i32' });
  const y = model.forward(x);
  const logits = (await y.data()) as Float32Array;
  x.dispose(); y.dispose();
  const start = tokenizer.prefixIds.length > 0 ? [...tokenizer.prefixIds] : [tokenizer.eosId];
  const g = await generate(model, tokenizer, PROMPT, { maxTokens: 16, temperature: 0, startIds: start });
  const promptIds = [...start, ...tokenizer.encode(PROMPT)];
  const hard = HARD.map((s) => tokenizer.encode(s, { allowSpecial: true })); // as `tokenizers` does: added tokens are cut out of the text
  const base = join(dir, '..', dir.split('/').pop()!);
  writeFileSync(`${base}.fon.f32`, new Uint8Array(logits.buffer, logits.byteOffset, logits.byteLength));
  writeFileSync(`${base}.fon.json`, JSON.stringify({
    ids, vocab: logits.length / ids.length, prompt: PROMPT, promptIds, greedy: g.ids, stopReason: g.stopReason, hard: { strings: HARD, ids: hard },
  }));
  console.log(`${dir}: ${ids.length} positions, greedy ${g.ids.length} tokens (${g.stopReason})`);
}

for (const arch of ['gpt2', 'llama', 'mistral', 'qwen2', 'qwen3']) {
  const src = await loadModel(join(ROOT, arch), cpu);
  const dir = join(OUT, `fixture-${arch}`);
  await exportHf(src.model, src.tokenizer, dir, { generation: src.generation });
  await answers(dir);
}

const STYLES: Record<string, object> = {
  llama: { dModel: 128, nLayers: 3, nHeads: 4, nKvHeads: 2, headDim: 32, mlpHidden: 352, contextLength: 128, qkNorm: false, tieEmbeddings: false, ropeTheta: 500000 },
  qwen3: { dModel: 128, nLayers: 3, nHeads: 4, nKvHeads: 2, headDim: 48, mlpHidden: 352, contextLength: 128, qkNorm: true, tieEmbeddings: true, ropeTheta: 1000000 },
};
for (const [style, cfg] of Object.entries(STYLES)) {
  const run = join(OUT, `run-${style}`);
  mkdirSync(run, { recursive: true });
  writeFileSync(join(run, 'config.json'), JSON.stringify(cfg));
  fonCli(['train', '--data', 'builtin:brown', '--out', run, '--config', join(run, 'config.json'), '--tokenizer', 'bpe:1024', '--steps', flags.steps!,
    '--batch', '4', '--eval-every', '1000', '--eval-windows', '4', '--final-eval-windows', '4', '--backend', 'cpu', '--overwrite']);
  const dir = join(OUT, `trained-${style}`);
  fonCli(['export', '--model', run, '--out', dir, '--format', 'hf']);
  await answers(dir);
}
