/**
 * Training Focus on the command line (src/cli/focus.ts), as a user runs it: `fon train --init-from
 * CKPT --add focus:… --train-only focus` keeps every original tensor bit for bit and adds Focus
 * tensors (fresh from --seed), logs, prints and plots the groups' dominance, and a resume freezes
 * the same tensors; a checkpoint whose Focus tensors do not match its config is refused naming the
 * tensor; a Focus model from scratch and full fine-tuning; --add over a Hugging Face folder. Eval,
 * info and the flags' errors: test/cli/focus_eval_cli.test.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { cpSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import * as fon from '../../src/index.ts';
import { loadModel } from '../../src/io/model_checkpoint.ts';
import { parseModelConfig } from '../../src/model/config.ts';
import { Decoder } from '../../src/model/decoder.ts';
import { ParamFactory } from '../../src/nn/params.ts';
import { fon as run } from './fon_process.ts';
import { assertCleanError, COMMON, focusFixture, latest, readLog, same, tensors, trainFocus } from './focus_fixtures.ts';

const fx = focusFixture('focus-cli');
test.after(() => fx.remove());
const { dir, corpus, evalText, config, base } = fx;
const FOCUS_NAMES = ['layers.0.attn.focus.proj.weight', 'layers.0.attn.focus.centroids', 'layers.0.attn.focus.lognorm'];
/** The Focus model the later tests start from (made by the first test). */
const tuned = join(dir, 'tuned');

test('fon train --init-from CKPT --add focus:… --train-only focus: the original tensors bit for bit plus trained Focus tensors; dominance logged, printed and plotted; a resume freezes the same', () => {
  const t = trainFocus(fx, tuned, '--seed', '5', '--steps', '4', '--eval-every', '2', '--eval-windows', '2', '--final-eval-windows', '4');
  assert.equal(t.code, 0, t.err);
  assert.match(t.err, /--add focus:K=4,k=1,dg=8,w=4: layer 0 is a Focus layer \(focus\(K=4, k=1, w=4\)\); their W_g and C start fresh \(seed 5\)/);
  assert.match(t.err, /--train-only focus: training 160 of [\d,]+ parameters \(W_g and C of 1 Focus layer\), the rest frozen/);

  // The config: layer 0 is Focus (the options over the defaults), layer 1 is still local.
  const cfg = JSON.parse(readFileSync(join(latest(tuned), 'config.json'), 'utf8'));
  assert.deepEqual(cfg.attention, [
    { type: 'focus', groups: 4, topK: 1, groupDim: 8, window: 4, tau: 0.1, sinkhornIters: 10, gate: 'mask', lambda: 10, beta: 0.5 },
    { type: 'local', window: 8 },
  ]);

  // Every tensor of the starting checkpoint, bit for bit; the three Focus tensors besides.
  const before = tensors(base), after = tensors(tuned);
  for (const [name, t0] of Object.entries(before)) assert.ok(after[name] && same(t0, after[name]), `${name} is saved as it was loaded`);
  assert.deepEqual(Object.keys(after).filter((n) => !(n in before)).sort(), [...FOCUS_NAMES].sort());
  assert.deepEqual(after['layers.0.attn.focus.proj.weight'].shape, [8, 16]);
  assert.deepEqual(after['layers.0.attn.focus.centroids'].shape, [4, 8]);
  // The log-normalizers are not trained but follow Sinkhorn's potentials in place, and are saved.
  const lognorm = new Float32Array(Uint8Array.from(after['layers.0.attn.focus.lognorm'].data).buffer);
  assert.ok(lognorm.some((x) => x !== 0), `the log-normalizers moved: ${Array.from(lognorm)}`);

  // The log: dominance at each evaluation (steps 2 and 4), in [1/K, 1]; gradients reached W_g and C.
  const log = readLog(tuned);
  assert.ok(log.filter((e) => 'loss' in e).every((e) => (e.gradNorm as number) > 0), 'the Focus tensors had gradients');
  const evals = log.filter((e) => 'valLoss' in e);
  assert.deepEqual(evals.map((e) => e.step), [2, 4]);
  for (const e of evals) {
    const d = e.focusDominance as number;
    assert.ok(d >= 0.25 - 1e-9 && d <= 1, `dominance ${d}`);
    assert.deepEqual(e.focusLayerDominance, { 0: d });
    assert.equal('focusCollapsed' in e, d >= 0.9, 'focusCollapsed when the one group holds ≥ 90% of the tokens (k = 1)');
  }
  assert.match(t.err, /^focus: dominance \d+\.\d% \(ideal 25\.0%\), layer 0$/m, 'the evaluation during training');
  assert.match(t.out, /^focus: dominance \d+\.\d% \(ideal 25\.0%\), layer 0$/m, 'the final evaluation');
  assert.match(readFileSync(join(tuned, 'dominance.svg'), 'utf8'), /^<svg[^>]*>[\s\S]*balanced \(1\/K\)[\s\S]*<\/svg>\s*$/);
  assert.equal(JSON.parse(readFileSync(join(latest(tuned), 'trainer.json'), 'utf8')).run.trainOnly, 'focus');

  // Resume: the run spec remembers --train-only, so the same tensors stay frozen and the optimizer state lines up.
  const more = join(dir, 'tuned-more');
  cpSync(tuned, more, { recursive: true });
  const r = run('train', '--out', more, '--resume', '--steps', '6', '--backend', 'cpu');
  assert.equal(r.code, 0, r.err);
  assert.match(r.err, /--train-only focus: training 160 of/);
  const resumed = tensors(more);
  for (const [name, t0] of Object.entries(before)) assert.ok(same(t0, resumed[name]), `${name} still as loaded after the resume`);
  assert.ok(!same(after['layers.0.attn.focus.centroids'], resumed['layers.0.attn.focus.centroids']), 'the centroids trained on');
  assertCleanError(run('train', '--out', more, '--resume', '--train-only', 'focus', '--backend', 'cpu'), /--resume continues the run as its checkpoint describes it; drop --train-only/);
});

test('fon train --add: W_g and C start as a fresh model\'s of --seed (lr 1e-30 keeps them)', async () => {
  const out = join(dir, 'seed-7');
  const r = trainFocus(fx, out, '--seed', '7', '--steps', '1', '--lr', '1e-30', '--min-lr', '1e-30', '--eval-every', '0', '--final-eval-windows', '1');
  assert.equal(r.code, 0, r.err);
  const saved = tensors(out);
  const cpu = await fon.initBackend('cpu');
  const cfg = parseModelConfig(JSON.parse(readFileSync(join(latest(out), 'config.json'), 'utf8')));
  for (const [seed, equal] of [[7, true], [8, false]] as const) {
    const fresh = new Decoder(cfg, new ParamFactory({ backend: cpu, seed }));
    for (const name of ['layers.0.attn.focus.proj.weight', 'layers.0.attn.focus.centroids']) {
      const p = fresh.namedParameters().find(([n]) => n === name)![1];
      assert.equal(Buffer.from(((await p.data()) as Float32Array).buffer).equals(Buffer.from(saved[name].data)), equal, `${name} against seed ${seed}`);
    }
    fresh.dispose();
  }
});

test('a checkpoint whose centroids do not match its config: the ShapeError names the tensor, with --add too (only missing Focus tensors start fresh)', () => {
  const bad = join(dir, 'bad-centroids');
  cpSync(latest(tuned), bad, { recursive: true });
  const cfgFile = join(bad, 'config.json');
  const cfg = JSON.parse(readFileSync(cfgFile, 'utf8'));
  cfg.attention[0].groups = 3;
  // Layer 1 full, so that --add has a layer to turn into Focus (fresh) while layer 0's tensors load.
  cfg.attention[1] = { type: 'full' };
  writeFileSync(cfgFile, JSON.stringify(cfg));
  const expected = /tensor 'layers\.0\.attn\.focus\.centroids' has shape \[4,8\], the config expects \[3,8\]/;
  assertCleanError(run('eval', '--model', bad, '--file', evalText, '--backend', 'cpu'), expected);
  assertCleanError(run('train', '--data', corpus, '--init-from', bad, '--add', 'focus:K=4,k=1,dg=8', ...COMMON, '--steps', '1', '--out', join(dir, 'bad-out')), expected);
});

test('a Focus model from scratch (--add over --config) and full fine-tuning from a Focus checkpoint: every parameter but the log-normalizers trains', () => {
  const scratch = join(dir, 'scratch');
  const t = run('train', '--data', corpus, '--config', config, '--tokenizer', 'byte', '--add', 'focus:K=2,k=1,dg=4,w=4', '--steps', '2', ...COMMON, '--eval-every', '0', '--final-eval-windows', '2', '--out', scratch);
  assert.equal(t.code, 0, t.err);
  assert.equal(JSON.parse(readFileSync(join(latest(scratch), 'config.json'), 'utf8')).attention[0].type, 'focus');
  assert.match(t.out, /^focus: dominance \d+\.\d% \(ideal 50\.0%\), layer 0$/m);

  const full = join(dir, 'full-ft');
  const f = run('train', '--data', corpus, '--init-from', tuned, '--steps', '2', ...COMMON, '--eval-every', '0', '--final-eval-windows', '1', '--out', full);
  assert.equal(f.code, 0, f.err);
  const before = tensors(tuned), after = tensors(full);
  assert.ok(!same(before['layers.0.attn.q.weight'], after['layers.0.attn.q.weight']), 'without --train-only the whole model trains');
  assert.deepEqual(Object.keys(after).sort(), Object.keys(before).sort());
});

test('fon train --init-from a Hugging Face folder (llama) --add focus --train-only focus: 2 steps, every imported tensor kept', async () => {
  const hf = join(import.meta.dirname, '../fixtures/hf/llama');
  const out = join(dir, 'llama-focus');
  const t = run('train', '--data', join(import.meta.dirname, '../fixtures/hf/eval.txt'), '--init-from', hf, '--add', 'focus', '--train-only', 'focus', '--steps', '2', '--context', '64',
    ...COMMON, '--eval-every', '0', '--final-eval-windows', '1', '--out', out);
  assert.equal(t.code, 0, t.err);
  assert.match(t.err, /layers 0, 1 are Focus layers \(focus\(K=8, k=2, w=128\)\)/);
  assert.match(t.out, /^focus: dominance \d+\.\d% \(ideal 12\.5%\), layers \d+\.\d–\d+\.\d%$/m);
  const cpu = await fon.initBackend('cpu');
  const a = await loadModel(hf, cpu), b = await loadModel(out, cpu);
  const trained = new Map(b.model.namedParameters());
  let focus = 0;
  for (const [name] of trained) if (name.includes('.attn.focus.')) focus++;
  assert.equal(focus, 6, 'W_g, C and the log-normalizers of two layers');
  for (const [name, p] of a.model.namedParameters()) {
    const q = trained.get(name);
    assert.ok(q, `${name} is in the tuned checkpoint`);
    assert.ok(Buffer.from(((await p.data()) as Float32Array).buffer).equals(Buffer.from(((await q.data()) as Float32Array).buffer)), `${name} bit for bit`);
  }
  a.model.dispose();
  b.model.dispose();
});
