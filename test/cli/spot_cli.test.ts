/**
 * SpotAttention on the command line, as a user runs it: `fon train --init-from CKPT --add spot:…
 * --train-only spot` keeps every original tensor bit for bit, adds the selectors (fresh from
 * --seed) and trains them by the distillation KL, which the log records per step (spotKL) and per
 * evaluation (valSpotKL), the run prints and plots; `fon info` shows the selectors and their key
 * bytes; `fon generate --spot-top-k | --spot-top-p --stats` decodes and prints each layer's budget;
 * bad values are named with exit code 2 and nothing written.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fon as run } from './fon_process.ts';
import { assertCleanError, COMMON, focusFixture, latest, readLog, same, tensors } from './focus_fixtures.ts';

const fx = focusFixture('spot-cli');
test.after(() => fx.remove());
const { dir, corpus, base } = fx;
const tuned = join(dir, 'spot');
const SPOT_NAMES = ['layers.0.attn.spot.q.weight', 'layers.0.attn.spot.k.weight', 'layers.0.attn.spot.w.weight'];

test('fon train --init-from CKPT --add spot:… --train-only spot: the original tensors bit for bit plus the trained selectors; the KL logged, printed and plotted', () => {
  const t = run('train', '--data', corpus, '--init-from', base, '--add', 'spot:heads=2,dim=32,rule=top-k,fraction=0.5', '--train-only', 'spot', ...COMMON,
    '--seed', '5', '--steps', '8', '--lr', '3e-3', '--eval-every', '4', '--eval-windows', '2', '--final-eval-windows', '2', '--out', tuned);
  assert.equal(t.code, 0, t.err);
  assert.match(t.err, /--add spot:heads=2,dim=32,rule=top-k,fraction=0\.5: layer 0 is a Spot layer \(spot\(top-K 0\.5, f16 keys\)\); their selectors \(W_Q, W_K, W_w\) start fresh \(seed 5\)/);
  assert.match(t.err, new RegExp(`--train-only spot: training ${(16 * (2 * 32 + 32 + 2)).toLocaleString('en-US')} of [\\d,]+ parameters \\(selectors \\(W_Q, W_K, W_w\\) of 1 Spot layer\\), the rest frozen`));
  const cfg = JSON.parse(readFileSync(join(latest(tuned), 'config.json'), 'utf8'));
  assert.deepEqual(cfg.attention, [
    { type: 'spot', heads: 2, dim: 32, keys: 'f16', rule: 'top-k', p: 0.9, fraction: 0.5, loss: 'sparse', trainFraction: 0.5 },
    { type: 'local', window: 8 },
  ]);
  const before = tensors(base), after = tensors(tuned);
  for (const [name, t0] of Object.entries(before)) assert.ok(after[name] && same(t0, after[name]), `${name} is saved as it was loaded`);
  assert.deepEqual(Object.keys(after).filter((n) => !(n in before)).sort(), [...SPOT_NAMES].sort());
  assert.deepEqual(after['layers.0.attn.spot.q.weight'].shape, [64, 16]);
  assert.deepEqual(after['layers.0.attn.spot.k.weight'].shape, [32, 16]);
  assert.deepEqual(after['layers.0.attn.spot.w.weight'].shape, [2, 16]);
  // The log: the KL at every step, falling; at every evaluation on the validation windows.
  const log = readLog(tuned);
  const kl = log.filter((e) => 'loss' in e).map((e) => e.spotKL as number);
  assert.equal(kl.length, 8);
  assert.ok(kl.every((x) => x > 0 && Number.isFinite(x)), `spotKL ${kl}`);
  assert.ok(kl[7] < 0.9 * kl[0], `the KL falls: ${kl.map((x) => x.toFixed(3)).join(' ')}`);
  const evals = log.filter((e) => 'valLoss' in e);
  assert.deepEqual(evals.map((e) => e.step), [4, 8]);
  for (const e of evals) assert.ok((e.valSpotKL as number) > 0);
  assert.match(t.out, /spot: selectors' KL\(teacher ‖ selector\) on validation \d+\.\d+ nats \(mean over layers; curve .*spot_kl\.svg\)/);
  assert.ok(existsSync(join(tuned, 'spot_kl.svg')));
  assert.match(readFileSync(join(tuned, 'spot_kl.svg'), 'utf8'), /<svg[\s\S]*Spot selectors/);
});

test('fon info shows the selectors and their key bytes; fon generate --spot-top-k / --spot-top-p --stats decodes and prints the budget', () => {
  const info = run('info', '--model', tuned);
  assert.equal(info.code, 0, info.err);
  assert.match(info.out, new RegExp(`spot: ${(16 * 98).toLocaleString('en-US')} selector parameters in 1 layer \\([\\d.]+% of the model\\); selector keys 64 bytes per token beside the KV cache`));
  assert.match(info.out, /layer 0: selector: 2 index heads × 32, 16-token blocks; keys f16 \(64 bytes a token\); decoding static top-K 0\.5/);
  const json = JSON.parse(run('info', '--model', tuned, '--json').out);
  assert.deepEqual(json.spot, { parameters: 16 * 98, layers: 1, selectorKeyBytesPerToken: 64 });
  for (const flag of [['--spot-top-k', '0.5'], ['--spot-top-p', '0.9'], ['--spot-top-k', '0.5', '--spot-decode', 'gather']]) {
    const g = run('generate', '--model', tuned, '--prompt', 'The cat sat', '--max-tokens', '6', '--temperature', '0', '--backend', 'cpu', '--stats', ...flag);
    assert.equal(g.code, 0, g.err);
    // 32 tokens of context: every block is a sink or recency block, so decoding reads them all.
    assert.match(g.err, /spot: decoding read 100\.0% of the causal tokens, mean over 1 layer \(per layer 0: 100\.0%\)/);
  }
});

test('bad Spot flags are named, exit 2, nothing written', () => {
  const out = join(dir, 'bad');
  const train = (...args: string[]) => run('train', '--data', corpus, ...COMMON, '--steps', '1', '--out', out, ...args);
  assertCleanError(train('--init-from', base, '--add', 'spot:p=0'), /--add spot:p=0: attention\[0\]: 'p' = 0: expected a number in \(0, 1\]/);
  assertCleanError(train('--init-from', base, '--add', 'spot:rule=top-q'), /'rule' = "top-q": expected one of "top-p", "top-k"/);
  assertCleanError(train('--init-from', base, '--train-only', 'spot'), /^fon: train: --train-only spot: the model has no Spot layers \(add them with --add spot\)$/m);
  assert.equal(existsSync(join(out, 'latest.json')), false, 'no checkpoint written');
  const gen = (model: string, ...args: string[]) => run('generate', '--model', model, '--prompt', 'The', '--max-tokens', '2', '--backend', 'cpu', ...args);
  assertCleanError(gen(tuned, '--spot-top-p', '1.5'), /^fon: generate: --spot-top-p "1\.5": expected a number in \(0, 1\]$/m);
  assertCleanError(gen(tuned, '--spot-top-k', '0'), /generate: --spot-top-k "0": expected a number in \(0, 1\]/);
  assertCleanError(gen(tuned, '--spot-top-k', '0.5', '--spot-top-p', '0.9'), /generate: --spot-top-p and --spot-top-k exclude each other; give one/);
  assertCleanError(gen(base, '--spot-top-p', '0.9'), /generate: --spot-top-p 0\.9: the model has no Spot layers/);
  assertCleanError(gen(tuned, '--spot-decode', 'scatter'), /^fon: generate: --spot-decode "scatter": expected auto or mask or gather$/m);
  assertCleanError(gen(base, '--spot-decode', 'gather'), /generate: --spot-decode gather: the model has no Spot layers/);
});
