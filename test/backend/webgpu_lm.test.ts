/**
 * The language model on WebGPU: a few training steps follow the CPU's loss curve, the buffer pool
 * stays flat across steps, and greedy generation through the KV cache gives the CPU's tokens.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { CpuBackend } from '../../src/backend/cpu/backend.ts';
import type { Backend } from '../../src/index.ts';
import { parseModelConfig } from '../../src/model/config.ts';
import { Decoder } from '../../src/model/decoder.ts';
import { ParamFactory } from '../../src/nn/params.ts';
import { DEFAULT_TRAIN, Trainer } from '../../src/train/trainer.ts';
import { cachedStep, generate, generationCache } from '../../src/infer/generate.ts';
import { byteTokenizer } from '../../src/io/tokenizer/tokenizer.ts';
import type { WebGpuBackend } from '../../src/backend/webgpu/backend.ts';
import { exitAfterWebgpu, webgpuOrSkip, webgpuSkipReason } from './webgpu_setup.ts';

const gpu = await webgpuOrSkip();
exitAfterWebgpu();

const cfg = parseModelConfig({ vocabSize: 257, dModel: 32, nLayers: 2, nHeads: 4, nKvHeads: 2, headDim: 8, mlpHidden: 48, contextLength: 24, qkNorm: true, attention: [{ type: 'full' }, { type: 'local', window: 7 }] });
const batches = {
  batchAt(i: number) {
    const inputs = new Int32Array(2 * 24), targets = new Int32Array(2 * 24);
    for (let j = 0; j < inputs.length; j++) { inputs[j] = (i * 31 + j * 7) % 257; targets[j] = (i * 13 + j * 5 + 1) % 257; }
    return { inputs, targets };
  },
};

async function train(b: Backend, steps: number) {
  const m = new Decoder(cfg, new ParamFactory({ backend: b, seed: 3 }));
  const tr = new Trainer(m, batches, { ...DEFAULT_TRAIN, steps, batchSize: 2, context: 24, warmup: 1 });
  const losses: number[] = [], bytes: number[] = [];
  for (let s = 0; s < steps; s++) {
    losses.push((await tr.trainStep()).loss);
    const mem = b.memory();
    bytes.push(mem.liveBytes + mem.pooledBytes);
  }
  return { m, tr, losses, bytes };
}

test('language model: 8 training steps on webgpu follow the CPU loss curve; pool bytes stay flat [webgpu]', { skip: webgpuSkipReason() }, async () => {
  const want = await train(new CpuBackend(), 8);
  const got = await train(gpu!, 8);
  got.losses.forEach((l, i) => assert.ok(Math.abs(l - want.losses[i]) <= 1e-3 * Math.abs(want.losses[i]), `step ${i}: webgpu ${l} vs cpu ${want.losses[i]}`));
  for (let i = 3; i < got.bytes.length; i++) assert.equal(got.bytes[i], got.bytes[2], `step ${i}: the pool grew`);
  const tok = byteTokenizer();
  const a = await generate(want.m, tok, 'ab', { maxTokens: 8, temperature: 0 });
  const b = await generate(got.m, tok, 'ab', { maxTokens: 8, temperature: 0 });
  assert.deepEqual(b.ids, a.ids, 'greedy tokens');
  for (const r of [want, got]) { r.tr.dispose(); r.m.dispose(); }
});

test('decode steps reuse their buffers and bind groups: none created after the first steps [webgpu]', { skip: webgpuSkipReason() }, async () => {
  // The pool hands out the oldest parked buffer of a class, so each step gets the buffers the step
  // before had, and the runtime's bind-group cache hits; read-back buffers are kept too.
  const m = new Decoder(cfg, new ParamFactory({ backend: gpu!, seed: 3 }));
  const device = (gpu as unknown as { rt: { device: GPUDevice } }).rt.device;
  let groups = 0, buffers = 0;
  const makeGroup = device.createBindGroup.bind(device), makeBuffer = device.createBuffer.bind(device);
  device.createBindGroup = (d) => { groups++; return makeGroup(d); };
  device.createBuffer = (d) => { buffers++; return makeBuffer(d); };
  let cache: ReturnType<typeof generationCache> | undefined;
  try {
    cache = generationCache(m, 24);
    await cachedStep(m, cache, [1, 2, 3], 0);
    const made: string[] = [];
    for (let pos = 3; pos < 12; pos++) {
      const g0 = groups, b0 = buffers;
      await cachedStep(m, cache, [pos], pos);
      made.push(`${groups - g0}/${buffers - b0}`);
    }
    assert.deepEqual(made.slice(2), Array(made.length - 2).fill('0/0'), `bind groups/buffers made per step: ${made.join(' ')}`);
  } finally {
    device.createBindGroup = makeGroup;
    device.createBuffer = makeBuffer;
    cache?.dispose();
    m.dispose();
  }
});

test('read-back buffers keep being reused after more reads than the parking limit holds [webgpu]', { skip: webgpuSkipReason() }, async () => {
  // 1 MiB read 100 times: once 64 MiB had been parked in all, every later read made a new buffer
  // (the parked bytes were counted when parked and never when taken back).
  const be = gpu as unknown as WebGpuBackend;
  const device = be.rt.device;
  const h = be.upload(new Float32Array(1 << 18).fill(2), 'f32');
  let buffers = 0;
  const makeBuffer = device.createBuffer.bind(device);
  device.createBuffer = (d) => { buffers++; return makeBuffer(d); };
  try {
    const made: number[] = [];
    for (let i = 0; i < 100; i++) {
      const b0 = buffers;
      const got = await be.read(h, 'f32', 1 << 18);
      assert.equal(got[12345], 2);
      made.push(buffers - b0);
    }
    assert.deepEqual(made.slice(1), Array(99).fill(0), `buffers made per read: ${made.join(' ')}`);
  } finally {
    device.createBuffer = makeBuffer;
    be.free(h);
  }
});
