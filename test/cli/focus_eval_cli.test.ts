/**
 * Focus at inference on the command line (src/cli/focus.ts): `fon eval|generate --focus-top-k`,
 * `fon eval`'s focus figures (text and --json), `fon info`'s parameter count; and the errors of
 * --add, --train-only and --focus-top-k (exit code 2, one line naming the problem, no checkpoint
 * written). Training with Focus is test/cli/focus_cli.test.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fon as run } from './fon_process.ts';
import { assertCleanError, COMMON, focusFixture, trainFocus } from './focus_fixtures.ts';

const fx = focusFixture('focus-eval-cli');
test.after(() => fx.remove());
const { dir, corpus, evalText, config, base } = fx;
/** The base model with layer 0 made Focus (K = 4, k = 1), 2 steps of W_g and C. */
const tuned = join(dir, 'tuned');
const made = trainFocus(fx, tuned, '--steps', '2', '--eval-every', '0', '--final-eval-windows', '1');
assert.equal(made.code, 0, made.err);

test('fon eval --focus-top-k and --json\'s focus figures; fon generate --focus-top-k; fon info counts the Focus parameters', () => {
  const json = (...extra: string[]) => {
    const r = run('eval', '--model', tuned, '--file', evalText, '--json', '--backend', 'cpu', ...extra);
    assert.equal(r.code, 0, r.err);
    return JSON.parse(r.out) as { loss: number; focus: { topK: number; dominance: number; pairsRetained: number; blocksVisitedFraction: number } };
  };
  const k1 = json(), k2 = json('--focus-top-k', '2');
  assert.equal(k1.focus.topK, 1, 'the config\'s k');
  assert.equal(k2.focus.topK, 2);
  assert.ok(k1.focus.dominance >= 0.25 && k1.focus.dominance <= 1, `k = 1: dominance ${k1.focus.dominance}`);
  assert.ok(k2.focus.dominance >= 0.25 - 1e-9 && k2.focus.dominance <= 0.5, `k = 2: each token counts twice, so at most 1/2: ${k2.focus.dominance}`);
  for (const r of [k1, k2]) assert.ok(r.focus.blocksVisitedFraction > 0, `blocks visited ${r.focus.blocksVisitedFraction}`);
  assert.ok(k1.focus.pairsRetained > 0 && k1.focus.pairsRetained <= k2.focus.pairsRetained && k2.focus.pairsRetained <= 1, `pairs kept k=1 ${k1.focus.pairsRetained}, k=2 ${k2.focus.pairsRetained}`);
  assert.notEqual(k1.loss, k2.loss, 'k changes what a query sees');
  const text = run('eval', '--model', tuned, '--file', evalText, '--backend', 'cpu', '--focus-top-k', '4');
  assert.equal(text.code, 0, text.err);
  assert.match(text.out, /^focus: k=4, pairs kept 100\.0% of the causal pairs, key blocks visited \d+\.\d% of full causal attention's$/m);
  assert.match(text.out, /^focus: dominance 25\.0% \(ideal 25\.0%\), layer 0$/m, 'k = K: every token in every group');

  const g = run('generate', '--model', tuned, '--prompt', 'The cat', '--temperature', '0', '--max-tokens', '6', '--backend', 'cpu', '--focus-top-k', '4');
  assert.equal(g.code, 0, g.err);

  const info = run('info', '--model', tuned);
  assert.equal(info.code, 0, info.err);
  assert.match(info.out, /^focus: 160 parameters in 1 layer \(\d+\.\d\d% of the model\)$/m, 'W_g (8 × 16) + C (4 × 8)');
  const i = JSON.parse(run('info', '--model', tuned, '--json').out);
  assert.deepEqual(i.focus, { parameters: 160, layers: 1 });

  // k outside [1, K]: setFocusInference's ConfigError; a model without Focus layers: the flag is named.
  assertCleanError(run('eval', '--model', tuned, '--file', evalText, '--backend', 'cpu', '--focus-top-k', '5'), /^fon: focus top-k 5: layer 0 has K = 4 groups; expected k in \[1, 4\]$/m);
  assertCleanError(run('eval', '--model', base, '--file', evalText, '--backend', 'cpu', '--focus-top-k', '1'), /eval: --focus-top-k 1: the model has no Focus layers/);
  assertCleanError(run('generate', '--model', base, '--prompt', 'The', '--backend', 'cpu', '--focus-top-k', '1'), /generate: --focus-top-k 1: the model has no Focus layers/);
});

test('fon train --add / --train-only: bad values are named, exit 2, nothing written', () => {
  const out = join(dir, 'bad');
  const train = (...args: string[]) => run('train', '--data', corpus, ...COMMON, '--steps', '1', '--out', out, ...args);
  // (test/cli/compose.test.ts has the rest of --add's parsing errors.)
  assertCleanError(train('--init-from', base, '--add', 'focus:K=4,X=1'), /unknown Focus option "X"; known: K \(groups, default 8\), k \(topK, default 2\), dg \(groupDim, default 16\), w \(window, default 128\), tau .*N \(sinkhornIters.*gate.*lambda.*beta/);
  assertCleanError(train('--init-from', base, '--add', 'focus:K=4,k=5'), /--add focus:K=4,k=5: attention\[0\]: 'topK' = 5: expected k in \[1, K = 4\]/);
  assertCleanError(train('--init-from', base, '--train-only', 'focus'), /^fon: train: --train-only focus: the model has no Focus layers \(add them with --add focus\)$/m);
  assertCleanError(train('--config', config, '--tokenizer', 'byte', '--train-only', 'focus'), /train: --train-only focus: the model has no Focus layers \(add them with --add focus\)/);
  assertCleanError(train('--init-from', base, '--add', 'focus', '--train-only', 'mlp'), /train: --train-only "mlp": expected one of focus \(train W_g and C, freeze the rest\), spot/);
  assertCleanError(train('--init-from', tuned, '--add', 'focus'), /train: --add focus: the model has no layer with full attention \(its layers: focus\(K=4, k=1, w=4\), local\(window=8\)\)/);
  assert.equal(existsSync(join(out, 'latest.json')), false, 'no checkpoint written');
});
