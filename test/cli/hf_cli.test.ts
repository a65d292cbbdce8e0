/**
 * The `fon` commands on Hugging Face folders (test/fixtures/hf, made by transformers 5.17.0), as a
 * user runs them: eval reproduces transformers' perplexity over windows of 128 tokens, info names
 * the architecture, generate follows the tokenizer's prefix and generation_config.json, and train
 * --init-from fine-tunes from the folder.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as fon from '../../src/index.ts';
import { generate } from '../../src/infer/generate.ts';
import { loadModel } from '../../src/io/model_checkpoint.ts';
import { fon as fon_ } from './fon_process.ts';

const FIX = join(import.meta.dirname, '../fixtures/hf');
const EVAL_TEXT = join(FIX, 'eval.txt');
const dir = mkdtempSync(join(tmpdir(), 'fon-hf-cli-'));
test.after(() => rmSync(dir, { recursive: true, force: true }));


const reference = (arch: string) => JSON.parse(readFileSync(join(FIX, arch, 'reference.json'), 'utf8')) as { perplexity: number; scored_tokens: number; eval_bytes: number };

test('fon eval --model HF_DIR --file F --context 128 --json reproduces transformers\' perplexity (non-overlapping windows of 128, the last shorter)', (t) => {
  for (const arch of ['gpt2', 'llama', 'mistral', 'qwen2', 'qwen3']) {
    const r = fon_('eval', '--model', join(FIX, arch), '--file', EVAL_TEXT, '--context', '128', '--json', '--backend', 'cpu');
    assert.equal(r.code, 0, r.err);
    const got = JSON.parse(r.out), want = reference(arch);
    assert.equal(got.tokens, want.scored_tokens, `${arch}: scored tokens`);
    const rel = Math.abs(got.perplexity - want.perplexity) / want.perplexity;
    assert.ok(rel < 1e-5, `${arch}: perplexity ${got.perplexity} vs transformers ${want.perplexity} (relative ${rel})`);
    t.diagnostic(`${arch}: fon eval ${got.perplexity.toFixed(4)} vs transformers ${want.perplexity.toFixed(4)} (relative ${rel.toExponential(2)})`);
  }
});

test('fon eval --file scores the exact text as transformers does: blank lines, trailing spaces, CRLF, tabs and separator lines kept; sliding windows (stride 60) with the last shorter', (t) => {
  const file = join(FIX, 'eval_exact.txt');
  for (const arch of ['gpt2', 'llama']) {
    const want = JSON.parse(readFileSync(join(FIX, arch, 'exact_reference.json'), 'utf8')) as { perplexity: number; scored_tokens: number; eval_bytes: number; context: number; stride: number };
    const r = fon_('eval', '--model', join(FIX, arch), '--file', file, '--context', String(want.context), '--stride', String(want.stride), '--json', '--backend', 'cpu');
    assert.equal(r.code, 0, r.err);
    const got = JSON.parse(r.out);
    assert.equal(got.tokens, want.scored_tokens, `${arch}: scored tokens`);
    const rel = Math.abs(got.perplexity - want.perplexity) / want.perplexity;
    assert.ok(rel < 1e-5, `${arch}: perplexity ${got.perplexity} vs transformers ${want.perplexity} (relative ${rel})`);
    t.diagnostic(`${arch}: fon eval ${got.perplexity.toFixed(4)} vs transformers ${want.perplexity.toFixed(4)} (relative ${rel.toExponential(2)})`);
  }
});

test('fon info on a Hugging Face folder names the architecture and the mapped config', () => {
  const r = fon_('info', '--model', join(FIX, 'qwen3'), '--json');
  assert.equal(r.code, 0, r.err);
  const i = JSON.parse(r.out);
  assert.equal(i.huggingFace, 'qwen3');
  assert.equal(i.config.headDim, 32);
  assert.equal(i.config.qkNorm, true);
  assert.equal(i.tokenizerVocab, 1002);
  // 2 layers × 2 kv heads × 32 × (k and v) × 4 bytes.
  assert.equal(i.kvCacheBytesPerToken.f32, 2 * 2 * 32 * 2 * 4);
  assert.match(fon_('info', '--model', join(FIX, 'llama')).out, /^checkpoint: .*llama \(Hugging Face llama\)$/m);
});

test('fon generate on a Hugging Face folder: the tokenizer\'s prefix before the prompt, generation_config.json\'s defaults', async () => {
  // A Llama-3-style post-processor: <|begin_of_text|> (id 0) before every text.
  const bos = join(dir, 'llama-bos');
  cpSync(join(FIX, 'llama'), bos, { recursive: true });
  const tj = JSON.parse(readFileSync(join(bos, 'tokenizer.json'), 'utf8'));
  tj.post_processor = {
    type: 'Sequence',
    processors: [
      { type: 'ByteLevel', add_prefix_space: false, trim_offsets: false, use_regex: true },
      { type: 'TemplateProcessing', single: [{ SpecialToken: { id: '<|begin_of_text|>', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }], pair: [], special_tokens: { '<|begin_of_text|>': { id: '<|begin_of_text|>', ids: [0], tokens: ['<|begin_of_text|>'] } } },
    ],
  };
  writeFileSync(join(bos, 'tokenizer.json'), JSON.stringify(tj));
  const cpu = await fon.initBackend('cpu');
  const m = await loadModel(bos, cpu);
  assert.deepEqual(m.tokenizer.prefixIds, [0]);
  const prompt = 'The jury said';
  const withBos = await generate(m.model, m.tokenizer, prompt, { maxTokens: 8, temperature: 0, startIds: [0] });
  const without = await generate(m.model, m.tokenizer, prompt, { maxTokens: 8, temperature: 0, startIds: [] });
  assert.notDeepEqual(withBos.ids, without.ids, 'the start token changes what a greedy model continues with');
  m.model.dispose();
  const r = fon_('generate', '--model', bos, '--prompt', prompt, '--temperature', '0', '--max-tokens', '8', '--backend', 'cpu');
  assert.equal(r.code, 0, r.err);
  assert.equal(r.out, `${withBos.text}\n`);

  // qwen3's generation_config.json samples (do_sample, temperature 0.7, top_k 20, top_p 0.8): the
  // same seed gives the same text, another seed (very likely) another; --temperature 0 is greedy.
  const q = (...extra: string[]) => fon_('generate', '--model', join(FIX, 'qwen3'), '--prompt', '<|im_start|>user\nhi<|im_end|>', '--max-tokens', '12', '--backend', 'cpu', ...extra);
  const a = q('--seed', '1'), b = q('--seed', '1'), c = q('--seed', '2');
  assert.equal(a.code, 0, a.err);
  assert.equal(a.out, b.out);
  assert.notEqual(a.out, c.out);
  const g1 = q('--temperature', '0', '--seed', '1'), g2 = q('--temperature', '0', '--seed', '2');
  assert.equal(g1.out, g2.out, 'greedy ignores the seed');
});

test('fon train --init-from a Hugging Face folder fine-tunes it (lr 1e-30 keeps the weights: eval is unchanged)', () => {
  const out = join(dir, 'tuned');
  const t = fon_('train', '--data', EVAL_TEXT, '--init-from', join(FIX, 'qwen3'), '--out', out, '--steps', '1', '--batch', '2', '--context', '64',
    '--lr', '1e-30', '--min-lr', '1e-30', '--backend', 'cpu', '--eval-every', '0', '--final-eval-windows', '1');
  assert.equal(t.code, 0, t.err);
  const e = (model: string) => JSON.parse(fon_('eval', '--model', model, '--file', EVAL_TEXT, '--context', '128', '--json', '--backend', 'cpu').out);
  const before = e(join(FIX, 'qwen3')), after = e(out);
  assert.equal(after.tokens, before.tokens);
  assert.equal(after.perplexity, before.perplexity);
});

test('fon on a broken Hugging Face folder: one line naming the file or the value, exit 2', () => {
  const bad = (name: string, edit: (d: string) => void) => { const d = join(dir, name); cpSync(join(FIX, 'qwen3'), d, { recursive: true }); edit(d); return d; };
  const clean = (r: { code: number | null; err: string }, re: RegExp) => {
    assert.equal(r.code, 2, r.err);
    assert.match(r.err, re);
    assert.doesNotMatch(r.err, /\n\s+at /, 'no stack trace');
  };
  const noShard = bad('no-shard', (d) => rmSync(join(d, 'model-00003-of-00006.safetensors')));
  clean(fon_('info', '--model', noShard), /model-00003-of-00006\.safetensors/);
  const arch = bad('arch', (d) => {
    const c = JSON.parse(readFileSync(join(d, 'config.json'), 'utf8'));
    writeFileSync(join(d, 'config.json'), JSON.stringify({ ...c, model_type: 'falcon', architectures: ['FalconForCausalLM'] }));
  });
  clean(fon_('eval', '--model', arch, '--file', EVAL_TEXT, '--backend', 'cpu'), /falcon.*(gpt2|llama)/i);
  const cut = bad('cut', (d) => {
    const f = join(d, 'model-00001-of-00006.safetensors');
    writeFileSync(f, readFileSync(f).subarray(0, 100));
  });
  clean(fon_('generate', '--model', cut, '--prompt', 'x', '--backend', 'cpu'), /model-00001-of-00006\.safetensors/);
});
