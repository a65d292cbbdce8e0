/**
 * `fon train --attention-schedule lighthouse:F,TARGET` (train/attention_schedule.ts): the target's
 * layers run Lighthouse for the first F of the steps, then their own attention. Checked: the
 * grammar's errors by name; Lighthouse really runs in the first phase (the losses differ from
 * plain training there) and the switch comes at round(F · steps); a run stopped before the switch
 * and resumed follows the uninterrupted one exactly (log and weights); a model without the target's
 * layers, and --lighthouse without a schedule, are usage errors (exit 2, no stack trace); recovery
 * into sparse targets (local, fpa, focus) touches only those layers and samples afterwards.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as fon from '../../src/index.ts';
import { parseAttentionSchedule, switchStep, applyPhase } from '../../src/train/attention_schedule.ts';
import { parseLayerAttention } from '../../src/attention/table.ts';
import type { LighthouseSpec } from '../../src/attention/lighthouse/index.ts';
import { parseModelConfig } from '../../src/model/config.ts';
import { Decoder } from '../../src/model/decoder.ts';
import { ParamFactory } from '../../src/nn/params.ts';
import { fon as run, TINY_MODEL_CONFIG, writeSentenceCorpus } from './fon_process.ts';

const cpu = await fon.initBackend('cpu');
const LH = parseLayerAttention({ type: 'lighthouse', levels: 2, pool: 2, topk: 4, tile: 4 }, 'test') as LighthouseSpec;

test('the schedule\'s grammar: the phases, the fraction in (0, 1), fractions that add up, known mechanisms', () => {
  assert.deepEqual(parseAttentionSchedule('lighthouse:0.8,full', LH), { fraction: 0.8, target: 'full', lighthouse: LH });
  assert.equal(parseAttentionSchedule('lighthouse:0.25,focus:0.75', LH).target, 'focus');
  const bad: [string, string][] = [
    ['lighthouse:0.8', '--attention-schedule "lighthouse:0.8": expected STANDIN:FRACTION,TARGET such as lighthouse:0.8,full (two phases)'],
    ['full:0.8,lighthouse', '--attention-schedule "full:0.8,lighthouse": "full" cannot stand in for a phase; the first phase takes lighthouse (the training-only mechanism)'],
    ['beacon:0.8,full', '--attention-schedule "beacon:0.8,full": unknown mechanism "beacon"; the first phase takes lighthouse'],
    ['lighthouse:1,full', '--attention-schedule "lighthouse:1,full": the first phase\'s fraction "1": expected a number in (0, 1) (the target takes the rest)'],
    ['lighthouse:x,full', '--attention-schedule "lighthouse:x,full": the first phase\'s fraction "x": expected a number in (0, 1) (the target takes the rest)'],
    ['lighthouse:0.8,full:0.3', '--attention-schedule "lighthouse:0.8,full:0.3": the fractions 0.8 + 0.3 = 1.1: expected them to add up to 1'],
    ['lighthouse:0.8,dense', '--attention-schedule "lighthouse:0.8,dense": unknown target "dense"; expected one of full, local, fox, fpa, focus, spot'],
    ['lighthouse:0.8,lighthouse', '--attention-schedule "lighthouse:0.8,lighthouse": the target must be another mechanism than lighthouse (the one the layers recover into)'],
  ];
  for (const [text, message] of bad) assert.throws(() => parseAttentionSchedule(text, LH), (e) => e instanceof fon.ArgumentError && e.message === message, text);
  assert.equal(switchStep(parseAttentionSchedule('lighthouse:0.8,full', LH), 10), 8);
  assert.equal(switchStep(parseAttentionSchedule('lighthouse:0.01,full', LH), 10), 1, 'at least one step of Lighthouse');
  assert.equal(switchStep(parseAttentionSchedule('lighthouse:0.99,full', LH), 10), 9, 'at least one step of recovery');
});

test('the phases on a model: Lighthouse in the target\'s layers before the switch (their output differs), their own attention from it on (the output as before)', () => {
  const cfg = parseModelConfig({ vocabSize: 20, dModel: 16, nLayers: 2, nHeads: 2, nKvHeads: 1, headDim: 8, mlpHidden: 24, contextLength: 32, attention: [{ type: 'full' }, { type: 'local', window: 4 }] });
  const m = new Decoder(cfg, new ParamFactory({ backend: cpu, seed: 2 }));
  const x = fon.tensor(Int32Array.from({ length: 16 }, (_, i) => (i * 7) % 20), [1, 16], { dtype: 'i32', backend: cpu });
  const own = Array.from(fon.tidy(() => m.forward(x)).dataSync() as Float32Array);
  const s = parseAttentionSchedule('lighthouse:0.5,full', LH);
  assert.equal(applyPhase(s, m, 2, 10), 'lighthouse');
  assert.ok(m.layers[0].attn.standIn !== null && m.layers[1].attn.standIn === null, 'only the full layer');
  const lit = Array.from(fon.tidy(() => m.forward(x)).dataSync() as Float32Array);
  assert.ok(lit.some((v, i) => Math.abs(v - own[i]) > 1e-4), 'Lighthouse changes the layer\'s output');
  assert.equal(applyPhase(s, m, 5, 10), 'target');
  assert.deepEqual(Array.from(fon.tidy(() => m.forward(x)).dataSync() as Float32Array), own);
  assert.throws(() => applyPhase(parseAttentionSchedule('lighthouse:0.5,focus', LH), m, 0, 10), (e) => e instanceof fon.ArgumentError && e.message === '--attention-schedule: the model has no focus layers to recover into (its layers are full, local)');
  m.dispose();
});

const dir = mkdtempSync(join(tmpdir(), 'fon-schedule-'));
const corpus = join(dir, 'corpus.txt');
writeSentenceCorpus(corpus, ['The cat sat on the mat.', 'A dog ran in the park.', 'We read books at night.', 'Rain fell on the old town.'], 400, 7);
const config = join(dir, 'model.json');
writeFileSync(config, JSON.stringify(TINY_MODEL_CONFIG));
const TRAIN = ['train', '--data', corpus, '--config', config, '--tokenizer', 'byte', '--steps', '6', '--batch', '2', '--backend', 'cpu', '--eval-every', '0', '--checkpoint-every', '0', '--final-eval-windows', '2'];
const SCHEDULE = ['--attention-schedule', 'lighthouse:0.5,full', '--lighthouse', 'levels=2,pool=2,topk=4,tile=4'];
const losses = (out: string) => readFileSync(join(out, 'log.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l)).filter((e) => e.loss !== undefined).map((e) => e.loss as number);

test('fon train --attention-schedule: Lighthouse for the first half (losses unlike plain training), the switch at step 3, and a run stopped before it resumes exactly', () => {
  const plain = join(dir, 'plain'), straight = join(dir, 'straight'), resumed = join(dir, 'resumed');
  assert.equal(run(...TRAIN, '--out', plain).code, 0);
  const s = run(...TRAIN, ...SCHEDULE, '--out', straight);
  assert.equal(s.code, 0, s.err);
  assert.match(s.err, /--attention-schedule: layer 0 run Lighthouse \(L=2, p=2, k=4\) until step 3, then their own full attention/);
  assert.match(s.err, /step 3: Lighthouse ends; layers 0 recover with their own full attention/);
  const [a, b] = [losses(plain), losses(straight)];
  assert.notEqual(b[0], a[0], 'the first step already runs Lighthouse (the same initial weights, another attention)');
  assert.notDeepEqual(b.slice(0, 3), a.slice(0, 3), 'the first phase trains another function');
  const stopped = run(...TRAIN, ...SCHEDULE, '--out', resumed, '--stop-after', '2');
  assert.equal(stopped.code, 130, stopped.err);
  const again = run('train', '--out', resumed, '--resume', '--backend', 'cpu', '--final-eval-windows', '2');
  assert.equal(again.code, 0, again.err);
  assert.match(again.err, /layer 0 run Lighthouse .* until step 3/);
  assert.equal(readFileSync(join(resumed, 'log.jsonl'), 'utf8'), readFileSync(join(straight, 'log.jsonl'), 'utf8'));
  assert.deepEqual(readFileSync(join(resumed, 'step-000006', 'model.safetensors')), readFileSync(join(straight, 'step-000006', 'model.safetensors')));
});

test('fon train --attention-schedule: bad schedules, a model without the target\'s layers and --lighthouse alone are usage errors', () => {
  const cases: [string[], RegExp][] = [
    [['--attention-schedule', 'lighthouse:1.5,full'], /train: --attention-schedule "lighthouse:1\.5,full": the first phase's fraction "1\.5": expected a number in \(0, 1\)/],
    [['--attention-schedule', 'lighthouse:0.5,focus'], /train: --attention-schedule: the model has no focus layers to recover into \(its layers are full\)/],
    [['--attention-schedule', 'lighthouse:0.5,full', '--lighthouse', 'pool=3'], /train: --lighthouse: 'pool' = 3: expected a power of 2 ≥ 2/],
    [['--attention-schedule', 'lighthouse:0.5,full', '--lighthouse', 'levels'], /train: --lighthouse "levels": "levels": expected NAME=VALUE pairs such as levels=3,pool=4,topk=512/],
    [['--lighthouse', 'levels=2'], /train: --lighthouse sets the Lighthouse layers of an --attention-schedule; give one/],
  ];
  for (const [flags, re] of cases) {
    const r = run(...TRAIN, ...flags, '--out', join(dir, 'bad'), '--overwrite');
    assert.equal(r.code, 2, r.err);
    assert.match(r.err, re);
    assert.doesNotMatch(r.err, /\n\s+at /, 'no stack trace');
  }
});

test('fon train --sample: a model of Lighthouse layers says it cannot decode (exit 0, checkpoint written); after a schedule\'s recovery it samples', () => {
  const lhConfig = join(dir, 'lighthouse.json');
  writeFileSync(lhConfig, JSON.stringify({ ...TINY_MODEL_CONFIG, attention: [{ type: 'lighthouse', levels: 2, pool: 2, topk: 4, tile: 4 }] }));
  const only = run(...TRAIN.map((x) => (x === config ? lhConfig : x)), '--out', join(dir, 'lh-only'), '--sample', '--sample-tokens', '8');
  assert.equal(only.code, 0, only.err);
  assert.match(only.out, /^sample: none — layer 0 is training-only \(lighthouse\(L=2, p=2, k=4\)\) and cannot decode; train the recovery with --attention-schedule lighthouse:F,full on a model of full layers$/m);
  const recovered = run(...TRAIN, ...SCHEDULE, '--out', join(dir, 'recovered'), '--sample', '--sample-tokens', '8');
  assert.equal(recovered.code, 0, recovered.err);
  assert.match(recovered.out, /^sample:\n {2}\S/m);
});

test('fon train --attention-schedule into sparse targets (local, fpa, focus): only those layers run Lighthouse, then recover with their own attention; the checkpoint keeps their config and samples', () => {
  const layers = [{ type: 'full' }, { type: 'local', window: 4 }, { type: 'fpa', walk: 'tanh' }, { type: 'focus', groups: 4, topK: 2, window: 4 }];
  const mixed = join(dir, 'mixed.json');
  writeFileSync(mixed, JSON.stringify({ ...TINY_MODEL_CONFIG, nLayers: 4, attention: layers }));
  for (const [target, layer] of [['local', 1], ['fpa', 2], ['focus', 3]] as const) {
    const out = join(dir, `sparse-${target}`);
    const r = run(...TRAIN.map((x) => (x === config ? mixed : x)), '--attention-schedule', `lighthouse:0.5,${target}`, '--lighthouse', 'levels=2,pool=2,topk=4,tile=4', '--out', out, '--sample', '--sample-tokens', '4');
    assert.equal(r.code, 0, r.err);
    assert.match(r.err, new RegExp(`--attention-schedule: layer ${layer} run Lighthouse \\(L=2, p=2, k=4\\) until step 3, then their own ${target} attention`));
    assert.match(r.err, new RegExp(`step 3: Lighthouse ends; layers ${layer} recover with their own ${target} attention`));
    assert.match(r.out, /^sample:\n {2}\S/m);
    const saved = JSON.parse(readFileSync(join(out, 'step-000006', 'config.json'), 'utf8'));
    assert.deepEqual(saved.attention.map((a: { type: string }) => a.type), ['full', 'local', 'fpa', 'focus'], 'the checkpoint keeps the model\'s own attention');
  }
});
