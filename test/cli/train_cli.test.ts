/**
 * The `fon` commands end to end as a user runs them (child processes): train → info → eval →
 * generate on a small text file and a tiny model, exact resume, Ctrl-C, and bad input (exit code 2,
 * one line naming the problem, no stack trace, no half-written checkpoint).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, writeFileSync, truncateSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadTokenizer } from '../../src/io/tokenizer/tokenizer.ts';
import { fon, FON, TINY_MODEL_CONFIG, writeSentenceCorpus } from './fon_process.ts';

const dir = mkdtempSync(join(tmpdir(), 'fon-cli-'));
const corpus = join(dir, 'corpus.txt');
writeSentenceCorpus(corpus, ['The cat sat on the mat.', 'A dog ran in the park.', 'We read books at night.', 'Rain fell on the old town.'], 400, 7);
const config = join(dir, 'model.json');
writeFileSync(config, JSON.stringify(TINY_MODEL_CONFIG));
const TRAIN = ['train', '--data', corpus, '--config', config, '--tokenizer', 'byte', '--steps', '6', '--batch', '2', '--backend', 'cpu', '--eval-every', '3', '--eval-windows', '2', '--checkpoint-every', '0', '--final-eval-windows', '4'];


function assertCleanError(r: { code: number | null; err: string }, re: RegExp) {
  assert.equal(r.code, 2, `exit code (stderr: ${r.err})`);
  assert.match(r.err, re);
  assert.doesNotMatch(r.err, /\n\s+at /, 'no stack trace');
}

test('fon train → info → eval → generate', () => {
  const out = join(dir, 'run');
  const t = fon(...TRAIN, '--out', out, '--sample', '--sample-tokens', '8');
  assert.equal(t.code, 0, t.err);
  assert.match(t.out, /^validation: perplexity \d+\.\d+, bits per byte \d+\.\d+/m);
  assert.match(t.out, /^sample:/m);
  const latest = JSON.parse(readFileSync(join(out, 'latest.json'), 'utf8')).checkpoint;
  assert.equal(latest, 'step-000006');
  assert.deepEqual(readdirSync(join(out, latest)).sort(), ['config.json', 'model.safetensors', 'optimizer.safetensors', 'tokenizer.json', 'trainer.json']);
  const log = readFileSync(join(out, 'log.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l));
  assert.deepEqual(log.filter((e) => 'loss' in e).map((e) => e.step), [1, 2, 3, 4, 5, 6]);
  assert.deepEqual(log.filter((e) => 'valLoss' in e).map((e) => e.step), [3, 6]);
  assert.match(readFileSync(join(out, 'loss.svg'), 'utf8'), /^<svg[^>]*>[\s\S]*<\/svg>\s*$/);

  const info = fon('info', '--model', out, '--json');
  assert.equal(info.code, 0, info.err);
  const i = JSON.parse(info.out);
  assert.equal(i.config.dModel, 16);
  assert.equal(i.kvCacheBytesPerToken.f32, 2 * 1 * 1 * 8 * 4);

  const e1 = fon('eval', '--model', out, '--file', corpus, '--json', '--backend', 'cpu');
  assert.equal(e1.code, 0, e1.err);
  const r = JSON.parse(e1.out);
  assert.equal(r.context, 32);
  assert.ok(r.bitsPerByte > 0 && Math.abs(r.perplexity - Math.exp(r.loss)) < 1e-9 * r.perplexity);
  assert.ok(Math.abs(r.bitsPerByte - (r.loss * r.tokens) / Math.LN2 / r.bytes) < 1e-9);
  assert.equal(r.tokens, statSync(corpus).size - 1, 'stride = context scores every token after the first: the file\'s bytes, no separator after them');

  const g1 = fon('generate', '--model', out, '--prompt', 'The cat', '--temperature', '0', '--max-tokens', '12', '--backend', 'cpu');
  const g2 = fon('generate', '--model', join(out, latest), '--prompt', 'The cat', '--temperature', '0', '--max-tokens', '12', '--backend', 'cpu');
  assert.equal(g1.code, 0, g1.err);
  assert.equal(g1.out, g2.out, 'greedy is deterministic, from the output directory or the checkpoint directory');
  // The speed goes to stderr without --stats (stdout holds the text alone).
  assert.match(g1.err, /^12 tokens after a prompt of \d+, [\d.]+ tokens\/s, stopped by maxTokens$/m);
  assert.doesNotMatch(g1.out, /tokens\/s/);
});

test('fon train with a BPE tokenizer: bits per byte count the text\'s bytes', () => {
  const out = join(dir, 'bpe');
  const t = fon(...TRAIN.map((x) => (x === 'byte' ? 'bpe:300' : x)), '--out', out, '--steps', '2', '--eval-every', '0');
  assert.equal(t.code, 0, t.err);
  assert.match(t.err, /tokenizer: byte-level BPE of \d+ tokens/);
  const info = JSON.parse(fon('info', '--model', out, '--json').out);
  assert.ok(info.tokenizerVocab > 257 && info.tokenizerVocab <= 300, `vocabulary ${info.tokenizerVocab}`);
  const r = JSON.parse(fon('eval', '--model', out, '--file', corpus, '--json', '--backend', 'cpu').out);
  // Every token but the first is scored: the file's bytes without the first token's (no separator after the text).
  const latest = JSON.parse(readFileSync(join(out, 'latest.json'), 'utf8')).checkpoint;
  const tok = loadTokenizer(JSON.parse(readFileSync(join(out, latest, 'tokenizer.json'), 'utf8')));
  const first = tok.encode(readFileSync(corpus, 'utf8'))[0];
  assert.equal(r.bytes, statSync(corpus).size - new TextEncoder().encode(tok.decode([first])).length);
  assert.ok(r.tokens < r.bytes / 2, `BPE compresses: ${r.tokens} tokens for ${r.bytes} bytes`);
});

test('fon train: a run stopped and resumed follows the uninterrupted loss curve exactly', () => {
  const a = join(dir, 'straight'), b = join(dir, 'resumed');
  assert.equal(fon(...TRAIN, '--out', a).code, 0);
  const stopped = fon(...TRAIN, '--out', b, '--stop-after', '2');
  assert.equal(stopped.code, 130, stopped.err);
  assert.match(stopped.err, /stopped at step 2; continue with: fon train --out .* --resume/);
  const resumed = fon('train', '--out', b, '--resume', '--backend', 'cpu', '--final-eval-windows', '4');
  assert.equal(resumed.code, 0, resumed.err);
  assert.equal(readFileSync(join(b, 'log.jsonl'), 'utf8'), readFileSync(join(a, 'log.jsonl'), 'utf8'));
  assert.deepEqual(readFileSync(join(b, 'step-000006', 'model.safetensors')), readFileSync(join(a, 'step-000006', 'model.safetensors')));
});

test('fon train: Ctrl-C writes a checkpoint that resumes', async () => {
  const out = join(dir, 'interrupted');
  const child = spawn(process.execPath, [FON, ...TRAIN.map((x) => (x === '6' ? '100000' : x)), '--out', out, '--eval-every', '0', '--checkpoint-every', '2', '--warmup', '0'], { stdio: ['ignore', 'pipe', 'pipe'] });
  let err = '';
  child.stderr.on('data', (d) => { err += d; });
  const code = await new Promise<number | null>((resolve) => {
    // Interrupt once the first checkpoint exists, in the middle of the run.
    const poll = setInterval(() => { if (existsSync(join(out, 'latest.json'))) { clearInterval(poll); child.kill('SIGINT'); } }, 50);
    child.on('exit', (c) => { clearInterval(poll); resolve(c); });
  });
  assert.equal(code, 130, err);
  const latest = JSON.parse(readFileSync(join(out, 'latest.json'), 'utf8')).checkpoint as string;
  const step = Number(latest.slice(5));
  assert.ok(step >= 1);
  assert.ok(!readdirSync(out).some((f) => f.includes('.tmp-')), 'no temporary directory left');
  const state = JSON.parse(readFileSync(join(out, latest, 'trainer.json'), 'utf8'));
  assert.equal(state.step, step);
  const resumed = fon('train', '--out', out, '--resume', '--backend', 'cpu', '--steps', String(step + 2), '--final-eval-windows', '1');
  assert.equal(resumed.code, 0, resumed.err);
  assert.match(resumed.err, new RegExp(`resuming .* at step ${step}`));
  assert.equal(JSON.parse(readFileSync(join(out, 'latest.json'), 'utf8')).checkpoint, `step-${String(step + 2).padStart(6, '0')}`);
});

test('fon train on the CPU: Ctrl-C with no checkpoint due stops after the current step, not at the next checkpoint', async (t) => {
  const out = join(dir, 'interrupted-at-once');
  const args = [FON, ...TRAIN.map((x) => (x === '6' ? '100000' : x)), '--out', out, '--eval-every', '0', '--checkpoint-every', '100000', '--warmup', '0'];
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let err = '';
  child.stderr.on('data', (d) => { err += d; });
  let sentAt = 0;
  const code = await new Promise<number | null>((resolve) => {
    // Interrupt once training runs (the progress line shows a step); without a turn of the event loop between steps it would run all 100000.
    const poll = setInterval(() => { if (/step \d+\/100000/.test(err)) { clearInterval(poll); sentAt = performance.now(); child.kill('SIGINT'); } }, 20);
    child.on('exit', (c) => { clearInterval(poll); resolve(c); });
  });
  const waited = performance.now() - sentAt;
  assert.equal(code, 130, err);
  assert.ok(sentAt > 0 && waited < 15_000, `stopped ${waited.toFixed(0)} ms after SIGINT`);
  t.diagnostic(`exited ${waited.toFixed(0)} ms after SIGINT`);
  const stopped = Number(/stopped at step (\d+)/.exec(err)?.[1]);
  assert.ok(stopped >= 1 && stopped < 100000, err);
  assert.equal(JSON.parse(readFileSync(join(out, 'latest.json'), 'utf8')).checkpoint, `step-${String(stopped).padStart(6, '0')}`, 'the interrupt wrote a checkpoint of the step it stopped at');
});

test('fon eval --file scores the file\'s exact text: blank lines, trailing spaces and a separator line are kept', () => {
  const out = join(dir, 'eval-exact');
  assert.equal(fon(...TRAIN, '--out', out, '--steps', '1').code, 0);
  const file = join(dir, 'exact.txt');
  const text = '\n\n  leading blank lines\n<|endoftext|>\nsecond part   \n\n';
  writeFileSync(file, text);
  const r = fon('eval', '--model', out, '--file', file, '--json', '--backend', 'cpu');
  assert.equal(r.code, 0, r.err);
  const got = JSON.parse(r.out) as { tokens: number; bytes: number };
  assert.equal(got.tokens, Buffer.byteLength(text) - 1, 'one byte token per byte, every one after the first scored');
  assert.equal(got.bytes, Buffer.byteLength(text) - 1);
});

test('fon train --resume: flags fixed by the checkpoint, a corrupt trainer.json and a changed corpus are refused', () => {
  const out = join(dir, 'strict');
  const data = join(dir, 'strict.txt');
  writeFileSync(data, readFileSync(corpus, 'utf8'));
  assert.equal(fon(...TRAIN.map((x) => (x === corpus ? data : x)), '--out', out, '--steps', '2', '--eval-every', '0').code, 0);
  assertCleanError(fon('train', '--out', out, '--resume', '--backend', 'cpu', '--lr', '5', '--batch', '9'), /--resume continues the run as its checkpoint describes it; drop --batch, --lr/);
  writeFileSync(data, readFileSync(corpus, 'utf8').replace(/cat/g, 'cow'));
  assertCleanError(fon('train', '--out', out, '--resume', '--backend', 'cpu', '--steps', '3'), /the corpus .*strict\.txt changed since the checkpoint/);
  writeFileSync(join(out, 'step-000002', 'trainer.json'), '{oops');
  assertCleanError(fon('train', '--out', out, '--resume', '--backend', 'cpu'), /trainer\.json: not valid JSON/);
  writeFileSync(join(out, 'step-000002', 'trainer.json'), '{"step": 2}');
  assertCleanError(fon('train', '--out', out, '--resume', '--backend', 'cpu'), /trainer\.json: expected \{"step": integer, "optimizerScalars"/);
});

test('fon train --precision f16: the loss scale is saved and a stopped run resumes exactly; a bad or changed precision is refused', () => {
  const a = join(dir, 'f16-straight'), b = join(dir, 'f16-resumed');
  const F16 = [...TRAIN, '--precision', 'f16', '--steps', '4'];
  const straight = fon(...F16, '--out', a);
  assert.equal(straight.code, 0, straight.err);
  assert.match(straight.err, /backend cpu, precision f16;/);
  const log = readFileSync(join(a, 'log.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l));
  assert.ok(log.filter((e) => e.loss !== undefined).every((e) => e.lossScale === 65536 && e.skipped === undefined), 'every step taken at the initial scale');
  const state = JSON.parse(readFileSync(join(a, 'step-000004', 'trainer.json'), 'utf8'));
  assert.deepEqual(state.lossScale, { scale: 65536, goodSteps: 4 });
  assert.equal(state.run.train.precision, 'f16');
  assert.equal(fon(...F16, '--out', b, '--stop-after', '2').code, 130);
  assertCleanError(fon('train', '--out', b, '--resume', '--backend', 'cpu', '--precision', 'f32'), /drop --precision/);
  const resumed = fon('train', '--out', b, '--resume', '--backend', 'cpu', '--final-eval-windows', '4');
  assert.equal(resumed.code, 0, resumed.err);
  assert.equal(readFileSync(join(b, 'log.jsonl'), 'utf8'), readFileSync(join(a, 'log.jsonl'), 'utf8'));
  assert.deepEqual(readFileSync(join(b, 'step-000004', 'model.safetensors')), readFileSync(join(a, 'step-000004', 'model.safetensors')));
  assertCleanError(fon(...TRAIN, '--out', join(dir, 'f64'), '--precision', 'f64'), /train: --precision f64: expected f32, bf16, f16 or auto/);
  const file = join(b, 'step-000004', 'trainer.json');
  const s = JSON.parse(readFileSync(file, 'utf8'));
  s.lossScale.scale = -1;
  writeFileSync(file, JSON.stringify(s));
  assertCleanError(fon('train', '--out', b, '--resume', '--backend', 'cpu', '--steps', '5'), /trainer\.json: lossScale: 'scale' = -1: expected a finite number ≥ 1/);
});

test('fon train --resume holds trainer.json to the flags\' rules: bad optimizer scalars and training settings are named, not run', () => {
  const out = join(dir, 'tampered');
  assert.equal(fon(...TRAIN, '--out', out, '--steps', '2', '--eval-every', '0').code, 0);
  const file = join(out, 'step-000002', 'trainer.json');
  const good = readFileSync(file, 'utf8');
  const tamper = (edit: (s: { optimizerScalars: Record<string, unknown>; run: { train: Record<string, unknown> } }) => void, want: string) => {
    const s = JSON.parse(good);
    edit(s);
    writeFileSync(file, JSON.stringify(s));
    const r = fon('train', '--out', out, '--resume', '--backend', 'cpu', '--steps', '3');
    assert.equal(r.code, 2, r.err);
    assert.equal(r.err.trim(), `fon: ${want}`);
  };
  tamper((s) => { s.optimizerScalars.lr = {}; }, `${file}: optimizerScalars 'lr' = {}: expected a finite number ≥ 0`);
  tamper((s) => { s.optimizerScalars.t = 1.5; }, `${file}: optimizerScalars 't' = 1.5: expected an integer ≥ 0`);
  tamper((s) => { s.run.train.beta1 = null; }, `${file}: run.train: 'beta1' = null: expected a number ≥ 0 and < 1`);
  tamper((s) => { delete s.run.train.lr; }, `${file}: run.train: 'lr' = missing: expected a number ≥ 0`);
  tamper((s) => { s.run.train.batchSize = 2.5; }, `${file}: run.train: 'batchSize' = 2.5: expected an integer ≥ 1`);
  tamper((s) => { s.run.train.extra = 1; }, `${file}: run.train: unknown key 'extra'; expected steps, batchSize, accumulate, context, lr, minLr, warmup, weightDecay, beta1, beta2, gradClip, evalEvery, evalWindows, checkpointEvery, seed, precision`);
  tamper((s) => { s.run.train.precision = 'f8'; }, `${file}: run.train: 'precision' = "f8": expected f32, bf16, f16, auto`);
  writeFileSync(file, good);
  assert.equal(fon('train', '--out', out, '--resume', '--backend', 'cpu', '--steps', '3', '--final-eval-windows', '1').code, 0, 'the untouched state resumes');
});

test('fon: bad input gets one clear line and exit code 2', () => {
  assertCleanError(fon('train', '--data', join(dir, 'nope.txt'), '--out', join(dir, 'x1'), '--backend', 'cpu'), /corpus .*nope\.txt does not exist/);
  const empty = join(dir, 'empty.txt');
  writeFileSync(empty, '  \n');
  assertCleanError(fon('train', '--data', empty, '--out', join(dir, 'x2'), '--backend', 'cpu'), /empty/);
  const badCfg = join(dir, 'bad.json');
  writeFileSync(badCfg, JSON.stringify({ dModel: 16, nHeds: 2 }));
  assertCleanError(fon('train', '--data', corpus, '--config', badCfg, '--out', join(dir, 'x3'), '--backend', 'cpu'), /bad\.json: unknown key 'nHeds' \(value 2\)/);
  assertCleanError(fon('train', '--data', corpus, '--out', join(dir, 'x4'), '--resume', '--backend', 'cpu'), /--resume: .*x4 holds no checkpoint/);
  assertCleanError(fon('train', '--data', corpus, '--out', join(dir, 'x5'), '--steps', 'many', '--backend', 'cpu'), /--steps "many": expected an integer ≥ 1/);
  assertCleanError(fon('train', '--data', corpus, '--out', join(dir, 'x6'), '--frobnicate', '--backend', 'cpu'), /train: Unknown option '--frobnicate'/);
  assertCleanError(fon('train', '--data', corpus, '--out', join(dir, 'run'), '--backend', 'cpu'), /already holds a checkpoint; pass --resume to continue it or --overwrite/);
  assertCleanError(fon('generate', '--model', join(dir, 'nothing'), '--prompt', 'x', '--backend', 'cpu'), /no checkpoint at .*nothing: the path does not exist/);
  assertCleanError(fon('generate', '--model', join(dir, 'run'), '--prompt', 'x'.repeat(40), '--backend', 'cpu'), /prompt of 40 tokens .* context of 32 tokens/);
  assertCleanError(fon('frobnicate'), /unknown command 'frobnicate'/);
  // fon devices tries every backend (each command's module loads only when it runs, so devices registers them itself).
  const dev = fon('devices', '--backend', 'wasm');
  assert.equal(dev.code, 0, dev.err);
  assert.match(dev.out, /^wasm: ok/);
  // The command does not import the repository's benchmark scripts (they are not part of it).
  assertCleanError(fon('bench', '--help'), /^fon: there is no 'fon bench': the benchmarks are scripts of FON's repository \(npm run bench -- --help runs bench\/ops.ts/m);
  writeFileSync(join(dir, 'afile'), 'x');
  assertCleanError(fon('train', '--data', corpus, '--out', join(dir, 'afile'), '--backend', 'cpu'), /--out .*afile exists and is not a directory/);
  assertCleanError(fon('train', '--data', corpus, '--config', dir, '--out', join(dir, 'x7'), '--backend', 'cpu'), /--config .* is not a file; expected a model config JSON file/);
  assertCleanError(fon('train', '--data', corpus, '--tokenizer', 'bpe:100', '--out', join(dir, 'x8'), '--backend', 'cpu'), /--tokenizer bpe:100: a byte-level BPE needs 258/);
  assertCleanError(fon('generate', '--model', join(dir, 'run'), '--prompt', 'x', '--top-p', '0', '--backend', 'cpu'), /--top-p "0": expected a number in \(0, 1\]/);
  assert.ok(!existsSync(join(dir, 'x3')) || !existsSync(join(dir, 'x3', 'latest.json')), 'no checkpoint for a failed start');
});

test('fon: a corrupt checkpoint is named, not loaded', () => {
  const out = join(dir, 'corrupt');
  assert.equal(fon(...TRAIN, '--out', out, '--steps', '1', '--eval-every', '0').code, 0);
  const model = join(out, 'step-000001', 'model.safetensors');
  truncateSync(model, statSync(model).size - 10);
  assertCleanError(fon('generate', '--model', out, '--prompt', 'x', '--backend', 'cpu'), /model\.safetensors/);
  writeFileSync(join(out, 'step-000001', 'config.json'), '{"dModel": 16, "colour": "red"}');
  assertCleanError(fon('info', '--model', out), /config\.json: unknown key 'colour'/);
});

test('fon train --init-from: starts from a checkpoint\'s weights, config and tokenizer (lr 1e-30 keeps them bit for bit); clashing flags are refused', () => {
  const base = join(dir, 'init-base');
  assert.equal(fon(...TRAIN, '--out', base, '--steps', '2', '--eval-every', '0').code, 0);
  const tuned = join(dir, 'init-tuned');
  const t = fon('train', '--data', corpus, '--init-from', base, '--out', tuned, '--steps', '1', '--batch', '2', '--lr', '1e-30', '--min-lr', '1e-30', '--backend', 'cpu', '--eval-every', '0', '--final-eval-windows', '1');
  assert.equal(t.code, 0, t.err);
  assert.match(t.err, /starting from .*init-base.*step-000002/);
  const weights = (out: string) => readFileSync(join(out, JSON.parse(readFileSync(join(out, 'latest.json'), 'utf8')).checkpoint, 'model.safetensors'));
  assert.ok(weights(base).equals(weights(tuned)), 'with lr 1e-30 (updates below f32 resolution) the fine-tuned checkpoint holds the starting weights');
  const cfg = (out: string) => readFileSync(join(out, JSON.parse(readFileSync(join(out, 'latest.json'), 'utf8')).checkpoint, 'config.json'), 'utf8');
  assert.equal(cfg(tuned), cfg(base));
  assertCleanError(fon('train', '--data', corpus, '--init-from', base, '--preset', 'tiny', '--out', join(dir, 'init-x'), '--backend', 'cpu'), /--init-from .* brings the model's config and tokenizer; drop --preset/);
  assertCleanError(fon('train', '--data', corpus, '--init-from', join(dir, 'nowhere'), '--out', join(dir, 'init-y'), '--backend', 'cpu'), /nowhere/);
});

test('fon train writes log.jsonl and loss.svg at each evaluation, not only at checkpoints', async () => {
  const out = join(dir, 'live');
  const child = spawn(process.execPath, [FON, 'train', '--data', corpus, '--config', config, '--tokenizer', 'byte', '--steps', '100000', '--batch', '2', '--backend', 'cpu',
    '--eval-every', '3', '--eval-windows', '1', '--checkpoint-every', '0', '--out', out], { stdio: ['ignore', 'ignore', 'pipe'] });
  try {
    let err = '';
    child.stderr.on('data', (d) => { err += d; });
    // Poll until the first evaluation's line is in the log (no checkpoint is due for 100000 steps).
    const deadline = Date.now() + 60_000;
    let entries: Record<string, unknown>[] = [];
    while (Date.now() < deadline) {
      if (existsSync(join(out, 'log.jsonl'))) {
        entries = readFileSync(join(out, 'log.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
        // The log and the plot are written one after the other: wait for both.
        if (entries.some((e) => 'valLoss' in e) && existsSync(join(out, 'loss.svg'))) break;
      }
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.ok(entries.some((e) => e.step === 3 && typeof e.valLoss === 'number'), `the first evaluation is in the log (stderr: ${err.slice(-400)})`);
    assert.deepEqual(entries.filter((e) => 'loss' in e).slice(0, 3).map((e) => e.step), [1, 2, 3]);
    assert.ok(existsSync(join(out, 'loss.svg')));
    assert.equal(existsSync(join(out, 'latest.json')), false, 'no checkpoint was written');
  } finally {
    child.kill('SIGKILL');
  }
});
