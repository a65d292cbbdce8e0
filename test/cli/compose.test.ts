/**
 * Composing mechanisms onto trained layers from the CLI (src/cli/compose.ts), for every mechanism
 * the table says composes (Focus, Spot): `--add NAME:…`'s short names, the config rewrite (the
 * layers it composes onto only, one entry stays one entry, positions kept), `--train-only NAME`.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fon from '../../src/index.ts';
import { FOCUS_DEFAULTS, focusParameterCount } from '../../src/attention/focus/index.ts';
import { SPOT_DEFAULTS, spotParameterCount } from '../../src/attention/spot/index.ts';
import { parseModelConfig } from '../../src/model/config.ts';
import { Decoder } from '../../src/model/decoder.ts';
import { ParamFactory } from '../../src/nn/params.ts';
import { UsageError } from '../../src/cli/args.ts';
import { addComposedLayers, checkTrainOnly, COMPOSABLE, freezeAllBut, isComposedParameter, parseAddFlag, trainOnlyFlag } from '../../src/cli/compose.ts';
import { focusParameters } from '../../src/cli/focus.ts';

const cpu = await fon.initBackend('cpu');
const small = { vocabSize: 30, dModel: 16, nLayers: 3, nHeads: 2, nKvHeads: 2, headDim: 8, mlpHidden: 24, contextLength: 16 };

test('--add NAME:…: every short name maps to its config key; mechanisms that do not compose, unknown names and non-numbers are UsageErrors naming them', () => {
  assert.deepEqual([...COMPOSABLE], ['focus', 'spot']);
  assert.deepEqual(parseAddFlag('focus'), { type: 'focus', options: {} });
  assert.deepEqual(parseAddFlag('focus:K=8,k=2,dg=16,w=128,tau=0.1,N=10,gate=literal,lambda=5,beta=0.25'),
    { type: 'focus', options: { groups: 8, topK: 2, groupDim: 16, window: 128, tau: 0.1, sinkhornIters: 10, gate: 'literal', lambda: 5, beta: 0.25 } });
  assert.deepEqual(parseAddFlag('spot:heads=2,dim=32,keys=int4,rule=top-k,p=0.8,fraction=0.25,loss=dense,ktrain=0.75'),
    { type: 'spot', options: { heads: 2, dim: 32, keys: 'int4', rule: 'top-k', p: 0.8, fraction: 0.25, loss: 'dense', trainFraction: 0.75 } });
  assert.throws(() => parseAddFlag('fox:K=2'), (e) => e instanceof UsageError && /--add "fox:K=2": cannot add "fox"; --add takes focus, spot/.test(e.message));
  assert.throws(() => parseAddFlag('focus:groups=4'), /unknown Focus option "groups"; known: K \(groups, default 8\)/);
  assert.throws(() => parseAddFlag('spot:K=4'), /unknown Spot option "K"; known: heads \(heads, default 4\), dim \(dim, default 128\)/);
  assert.throws(() => parseAddFlag('focus:K'), /option K has no value; expected K=VALUE/);
  assert.throws(() => parseAddFlag('focus:tau=warm'), /--add focus:tau=warm: tau=warm: expected a number/);
  assert.throws(() => parseAddFlag('spot:p=high'), /--add spot:p=high: p=high: expected a number/);
  assert.throws(() => parseAddFlag('focus:K=4,K=5'), /option K is given twice/);
  assert.equal(trainOnlyFlag(undefined), undefined);
  assert.equal(trainOnlyFlag('spot'), 'spot');
  assert.throws(() => trainOnlyFlag('Focus'), /--train-only "Focus": expected one of focus \(train W_g and C, freeze the rest\), spot \(train selectors \(W_Q, W_K, W_w\), freeze the rest\)/);
});

test('addComposedLayers: full layers become the mechanism\'s entries over its defaults, others stay; one entry stays one; positions are kept; no full layer is a UsageError', () => {
  const mixed = parseModelConfig({ ...small, attention: [{ type: 'full' }, { type: 'local', window: 4 }, { type: 'full' }] });
  const a = addComposedLayers(mixed, parseAddFlag('focus:K=4,k=1'), 'focus:K=4,k=1');
  assert.deepEqual(a.attention.map((x) => x.type), ['focus', 'local', 'focus']);
  assert.deepEqual(a.attention[0], { type: 'focus', ...FOCUS_DEFAULTS, groups: 4, topK: 1 });
  assert.deepEqual(a.attention[1], mixed.attention[1]);
  // K = 1 without k: k defaults to min(2, K), as the mechanism's parse says.
  const one = addComposedLayers(parseModelConfig(small), { type: 'focus', options: { groups: 1 } }, 'focus:K=1');
  assert.equal(one.attention.length, 1);
  assert.deepEqual(one.attention[0], { type: 'focus', ...FOCUS_DEFAULTS, groups: 1, topK: 1 });
  // A FoX model with RoPE set explicitly stays RoPE (a new attention list alone would make it NoPE).
  const fox = parseModelConfig({ ...small, positions: 'rope', attention: [{ type: 'fox' }, { type: 'full' }, { type: 'full' }] });
  assert.equal(addComposedLayers(fox, { type: 'focus', options: {} }, 'focus').positions, 'rope');
  assert.throws(() => addComposedLayers(a, { type: 'spot', options: {} }, 'spot'), /--add spot: the model has no layer with full attention \(its layers: focus\(K=4, k=1, w=128\), local\(window=4\)\); --add spot turns full-attention layers into Spot layers/);
  assert.throws(() => addComposedLayers(mixed, { type: 'focus', options: { topK: 9 } }, 'focus:k=9'), /train: --add focus:k=9: attention\[0\]: 'topK' = 9: expected k in \[1, K = 8\]/);
  assert.throws(() => addComposedLayers(mixed, parseAddFlag('spot:p=1.5'), 'spot:p=1.5'), /train: --add spot:p=1\.5: attention\[0\]: 'p' = 1\.5: expected a number in \(0, 1\]/);
  assert.throws(() => addComposedLayers(mixed, parseAddFlag('spot:keys=int4,dim=48'), 'spot:keys=int4,dim=48'), /'dim' = 48: INT4 selector keys need a multiple of 32/);
  const s = addComposedLayers(mixed, parseAddFlag('spot:rule=top-k'), 'spot:rule=top-k');
  assert.deepEqual(s.attention[2], { type: 'spot', ...SPOT_DEFAULTS, rule: 'top-k' });
  const p = focusParameters(a);
  assert.deepEqual(p, { count: 2 * focusParameterCount(a.attention[0] as Parameters<typeof focusParameterCount>[0], 16), layers: 2 });
  assert.equal(p.count, 2 * (16 * 16 + 4 * 16));
  assert.equal(spotParameterCount({ type: 'spot', ...SPOT_DEFAULTS }, 16), 16 * (4 * 128 + 128 + 4));
});

test('--train-only spot: only the selectors train; a model without Spot layers is a UsageError', () => {
  const cfg = parseModelConfig({ ...small, attention: [{ type: 'spot', heads: 2, dim: 8 }] });
  assert.throws(() => checkTrainOnly('spot', parseModelConfig(small)), (e) => e instanceof UsageError && e.message === 'train: --train-only spot: the model has no Spot layers (add them with --add spot)');
  checkTrainOnly('spot', cfg);
  const m = new Decoder(cfg, new ParamFactory({ backend: cpu, seed: 1 }));
  const { trained, total } = freezeAllBut('spot', m);
  assert.equal(trained, 3 * 16 * (2 * 8 + 8 + 2));
  assert.equal(total, m.parameterCount());
  for (const [name, p] of m.namedParameters()) assert.equal(p.requiresGrad, /\.attn\.spot\./.test(name), name);
  assert.ok(isComposedParameter('layers.0.attn.spot.q.weight') && isComposedParameter('layers.2.attn.focus.centroids') && !isComposedParameter('layers.0.attn.q.weight'));
  m.dispose();
});
