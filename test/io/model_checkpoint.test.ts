import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as fon from '../../src/index.ts';
import { checkpointConfigJson, parseModelConfig } from '../../src/model/config.ts';
import { Decoder } from '../../src/model/decoder.ts';
import { ParamFactory } from '../../src/nn/params.ts';
import { loadModel, loadTrainerState, saveCheckpoint } from '../../src/io/model_checkpoint.ts';
import { byteTokenizer } from '../../src/io/tokenizer/tokenizer.ts';
import { encodeSafetensors } from '../../src/io/safetensors.ts';
import { AdamW } from '../../src/train/optim.ts';

const cpu = await fon.initBackend('cpu');
const cfg = parseModelConfig({ vocabSize: 257, dModel: 16, nLayers: 1, nHeads: 2, nKvHeads: 1, headDim: 8, mlpHidden: 24, contextLength: 16, tieEmbeddings: false });
const tok = byteTokenizer();

test('checkpoint: save → load gives the same logits, tokenizer and optimizer state', async () => {
  const out = mkdtempSync(join(tmpdir(), 'fon-ckpt-'));
  const m = new Decoder(cfg, new ParamFactory({ backend: cpu, seed: 9 }));
  const opt = new AdamW(m.parameters(), { lr: 1e-2 });
  const x = fon.tensor([[1, 2, 3, 4]], undefined, { backend: cpu, dtype: 'i32' });
  m.loss(x, x).backward();
  opt.step();
  const st = opt.stateDict();
  await saveCheckpoint(out, 'step-000001', m, tok, { optimizer: opt, trainer: { step: 1, optimizerScalars: st.scalars, run: { note: 'x' } } });
  const loaded = await loadModel(out, cpu);
  assert.deepEqual(loaded.config, cfg);
  assert.deepEqual(loaded.tokenizer.encode('héllo'), tok.encode('héllo'));
  assert.deepEqual(await loaded.model.forward(x).data(), await m.forward(x).data());
  const opt2 = new AdamW(loaded.model.parameters(), { lr: 1e-2 });
  const state = await loadTrainerState(loaded.dir, opt2, cpu);
  assert.equal(state.step, 1);
  assert.equal(opt2.t, 1);
  assert.deepEqual(await opt2.stateDict().tensors['m.0'].data(), await st.tensors['m.0'].data());
  m.dispose(); loaded.model.dispose(); opt.dispose(); opt2.dispose();
});

test('checkpoint: an extra tensor, a vocabulary mismatch and a missing file are named', async () => {
  const out = mkdtempSync(join(tmpdir(), 'fon-ckpt-'));
  const m = new Decoder(cfg, new ParamFactory({ backend: cpu, seed: 9 }));
  const dir = await saveCheckpoint(out, 'a', m, tok);
  const named = Object.fromEntries(await Promise.all(m.namedParameters().map(async ([n, t]) => [n, { dtype: 'F32' as const, shape: [...t.shape], data: (await t.data()) as Float32Array }])));
  writeFileSync(join(dir, 'model.safetensors'), encodeSafetensors({ ...named, 'layers.9.attn.q.weight': { dtype: 'F32', shape: [1], data: new Float32Array(1) } }));
  await assert.rejects(loadModel(out, cpu), /model\.safetensors has tensors the config does not use: layers\.9\.attn\.q\.weight/);
  writeFileSync(join(dir, 'config.json'), JSON.stringify({ ...checkpointConfigJson(cfg), vocabSize: 100 }));
  await assert.rejects(loadModel(out, cpu), /tokenizer\.json has 257 tokens but .*config\.json says vocabSize 100/);
  // A key left out would load as its default (a different model): every key the writer writes must be there.
  const { attention: _a, normEps: _n, depth: _d, ...partial } = checkpointConfigJson(cfg);
  writeFileSync(join(dir, 'config.json'), JSON.stringify(partial));
  await assert.rejects(loadModel(out, cpu), (e: unknown) => e instanceof fon.ConfigError
    && e.message === `${join(dir, 'config.json')}: missing 'depth', 'normEps', 'attention': a checkpoint's config holds every key (one left out would load as its default, another model)`);
  writeFileSync(join(dir, 'config.json'), JSON.stringify(checkpointConfigJson(cfg)));
  assert.deepEqual(JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8')).organs, null, 'organs off is written as null');
  const opt = new AdamW(m.parameters());
  await assert.rejects(loadTrainerState(dir, opt, cpu), /trainer\.json/);
  m.dispose(); opt.dispose();
});

test('checkpoint: trainer.json with an unknown key, and optimizer moments holding NaN, are refused on resume', async () => {
  const out = mkdtempSync(join(tmpdir(), 'fon-ckpt-'));
  const m = new Decoder(cfg, new ParamFactory({ backend: cpu, seed: 9 }));
  const opt = new AdamW(m.parameters(), { lr: 1e-2 });
  const st = opt.stateDict();
  const dir = await saveCheckpoint(out, 'step-000000', m, tok, { optimizer: opt, trainer: { step: 0, optimizerScalars: st.scalars, run: {} } });
  const trainer = JSON.parse(readFileSync(join(dir, 'trainer.json'), 'utf8'));
  writeFileSync(join(dir, 'trainer.json'), JSON.stringify({ ...trainer, stepp: 3 }));
  await assert.rejects(loadTrainerState(dir, opt, cpu), (e: unknown) => e instanceof fon.FonError
    && e.message === `${join(dir, 'trainer.json')}: unknown key 'stepp'; expected step, optimizerScalars, run, lossScale`);
  writeFileSync(join(dir, 'trainer.json'), JSON.stringify(trainer));
  const moments = Object.fromEntries(await Promise.all(Object.entries(st.tensors).map(async ([n, t]) => [n, { dtype: 'F32' as const, shape: [...t.shape], data: new Float32Array(await t.data()) }])));
  moments['v.2'].data[1] = NaN;
  writeFileSync(join(dir, 'optimizer.safetensors'), encodeSafetensors(moments));
  await assert.rejects(loadTrainerState(dir, opt, cpu), /optimizer\.safetensors: tensor 'v\.2' holds 1 non-finite value of \d+ \(the first, at index 1, is NaN\)/);
  m.dispose(); opt.dispose();
});
