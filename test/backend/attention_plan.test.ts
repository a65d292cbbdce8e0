/**
 * Which WebGPU attention kernel runs (src/backend/webgpu/kernels/attention_plan.ts), from
 * capabilities alone: no GPU needed. The device descriptions are the H200's as Dawn reports it
 * (f16, 16×16×16 subgroup matrices, 32-wide subgroups, 48 KB of workgroup memory) and
 * SwiftShader's (no f16, no subgroup matrices, 32 KB).
 *
 *   node --import tsx --test test/backend/attention_plan.test.ts
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { AttentionArgs } from '../../src/backend/backend.ts';
import type { GpuCaps } from '../../src/backend/webgpu/device.ts';
import { UnsupportedError } from '../../src/errors.ts';
import { aluBackwardPlan, attentionBackwardPlan, attentionForwardPlan, modifierBackwardPlan, modifierForwardPlan } from '../../src/backend/webgpu/kernels/attention_plan.ts';

const base: GpuCaps = {
  f16: true, subgroups: true, subgroupMinSize: 32, subgroupMaxSize: 32, subgroupMatrix: { m: 16, n: 16, k: 16 }, timestamps: true,
  maxBinding: 2 ** 31 - 4, maxBuffer: 2 ** 34, maxWorkgroupStorage: 49152, maxInvocations: 1024, maxStorageBuffers: 10, minUniformAlignment: 256, adapterName: 'h200-like', software: false,
};
const H200 = base;
const SWIFTSHADER: GpuCaps = { ...base, f16: false, subgroupMatrix: null, subgroupMinSize: 4, subgroupMaxSize: 4, maxWorkgroupStorage: 32768, maxInvocations: 256, adapterName: 'swiftshader-like', software: true };
/** Subgroup matrices of another shape (8×8×8), which the kernels do not take. */
const OTHER_MMA: GpuCaps = { ...base, subgroupMatrix: { m: 8, n: 8, k: 8 }, adapterName: 'mma-8x8' };

const args = (tq: number, tk: number, d: number, heads = 32, kvHeads = 32): AttentionArgs =>
  ({ batch: 1, heads, kvHeads, tq, tk, d, kvLength: tk, qOffset: tk - tq, causal: true, window: 0, scale: 1 / Math.sqrt(d) });

test('attention forward plan: decode for few query rows a GQA group, tensor cores for f16 with subgroup matrices, blocked where tiles fit, plain else', () => {
  assert.equal(attentionForwardPlan(H200, args(1, 4096, 128, 32, 8), 'f16'), 'decode');
  assert.equal(attentionForwardPlan(H200, args(4, 4096, 128, 32, 8), 'f16'), 'decode', '4 heads a group × 4 rows = 16 rows');
  assert.equal(attentionForwardPlan(H200, args(5, 4096, 128, 32, 8), 'f16'), 'blocked', '20 rows a group, but fewer than the 16 query rows a tensor-core tile needs');
  assert.equal(attentionForwardPlan(H200, args(16, 4096, 128, 32, 8), 'f16'), 'tensor-cores');
  assert.equal(attentionForwardPlan(H200, args(4096, 4096, 128), 'f16'), 'tensor-cores');
  assert.equal(attentionForwardPlan(H200, args(4096, 4096, 128), 'bf16'), 'blocked', 'no bf16 subgroup matrices');
  assert.equal(attentionForwardPlan(H200, args(4096, 4096, 24), 'f16'), 'blocked', 'head dim not a multiple of 16');
  assert.equal(attentionForwardPlan(H200, args(4096, 4096, 128), 'f32'), 'plain', 'f32 tiles of head dim 128 do not fit 48 KB');
  assert.equal(attentionForwardPlan(OTHER_MMA, args(4096, 4096, 128), 'f16'), 'blocked');
  assert.equal(attentionForwardPlan(SWIFTSHADER, args(4096, 4096, 64), 'f16'), 'blocked');
  assert.equal(attentionForwardPlan(SWIFTSHADER, args(4096, 4096, 256), 'f32'), 'plain');
});

test('attention backward plan: tensor cores for both passes with f16 inputs and gradient, else each pass blocked where its tiles fit', () => {
  const tc = { dq: 'tensor-cores', dkdv: 'tensor-cores' };
  assert.deepEqual(attentionBackwardPlan(H200, args(4096, 4096, 128), 'f16', 'f16'), tc);
  assert.deepEqual(attentionBackwardPlan(H200, args(16, 16, 64), 'f16', 'f16'), tc);
  assert.deepEqual(attentionBackwardPlan(H200, args(15, 300, 64), 'f16', 'f16'), { dq: 'blocked', dkdv: 'blocked' }, 'fewer than 16 query rows');
  assert.deepEqual(attentionBackwardPlan(H200, args(300, 15, 64), 'f16', 'f16'), { dq: 'blocked', dkdv: 'blocked' }, 'fewer than 16 keys');
  assert.deepEqual(attentionBackwardPlan(H200, args(4096, 4096, 128), 'f16', 'f32'), { dq: 'blocked', dkdv: 'plain' }, 'an f32 dO: no tensor cores, and its dk/dv tile cannot be packed');
  assert.deepEqual(attentionBackwardPlan(H200, args(4096, 4096, 256), 'f16', 'f16'), { dq: 'tensor-cores', dkdv: 'tensor-cores' }, 'head dim 256: 16 keys a dq step and 16 rows a dk/dv step fit 48 KB');
  assert.deepEqual(attentionBackwardPlan(H200, args(4096, 4096, 256), 'f32', 'f32'), { dq: 'plain', dkdv: 'plain' }, 'head dim 256 in f32: no blocked tiles fit 48 KB');
  assert.deepEqual(attentionBackwardPlan(H200, args(4096, 4096, 128), 'bf16', 'bf16'), { dq: 'blocked', dkdv: 'blocked' });
  assert.deepEqual(attentionBackwardPlan(SWIFTSHADER, args(4096, 4096, 128), 'f16', 'f16'), { dq: 'plain', dkdv: 'plain' });
  assert.deepEqual(attentionBackwardPlan(SWIFTSHADER, args(4096, 4096, 32), 'f32', 'f32'), { dq: 'blocked', dkdv: 'blocked' });
});

test('attention plans with a block mask: every kernel, decode where its rows share one list; a masked backward off the tensor cores needs 9 storage buffers', () => {
  const mask = { heads: 1, qBlocks: 32, kBlocks: 64, kBlock: 64, byKeyOffset: 32 * 65, segmentOffset: 0, bitsOffset: 0 };
  const a = { ...args(4096, 4096, 128), mask };
  assert.equal(attentionForwardPlan(H200, a, 'f16'), 'tensor-cores');
  assert.deepEqual(attentionBackwardPlan(H200, a, 'f16', 'f16'), { dq: 'tensor-cores', dkdv: 'tensor-cores' });
  // Decode reads a mask its workgroup's rows share: one for all heads, or per head with a group of
  // one head. A per-head mask over a GQA group of 4 runs the blocked kernel instead.
  assert.equal(attentionForwardPlan(H200, { ...args(1, 4096, 128, 32, 8), mask }, 'f16'), 'decode');
  assert.equal(attentionForwardPlan(H200, { ...args(1, 4096, 128, 32, 32), mask: { ...mask, heads: 32 } }, 'f16'), 'decode');
  assert.equal(attentionForwardPlan(H200, { ...args(1, 4096, 128, 32, 8), mask: { ...mask, heads: 32 } }, 'f16'), 'blocked');
  // A fine mask (16-key blocks: Spot's decode) is the decode kernel's alone; forward and backward elsewhere are refused.
  const fine = { ...mask, kBlock: 16, kBlocks: 256 };
  assert.equal(attentionForwardPlan(H200, { ...args(1, 4096, 128, 32, 8), mask: fine }, 'f16'), 'decode');
  assert.throws(() => attentionForwardPlan(H200, { ...args(4096, 4096, 128), mask: fine }, 'f16'), /webgpu: a fine block mask \(16-key blocks\) is read by the decode kernel only: 4096 query rows a KV head are past it/);
  assert.throws(() => attentionBackwardPlan(H200, { ...args(4096, 4096, 128), mask: fine }, 'f16', 'f16'), /a fine block mask \(16-key blocks\) has no backward/);
  assert.equal(attentionForwardPlan(H200, args(1, 4096, 128, 32, 8), 'f16'), 'decode');
  assert.equal(attentionForwardPlan(H200, a, 'bf16'), 'blocked');
  assert.equal(attentionForwardPlan(SWIFTSHADER, a, 'f16'), 'blocked');
  assert.equal(attentionForwardPlan(SWIFTSHADER, { ...args(4096, 4096, 256), mask }, 'f32'), 'plain');
  assert.deepEqual(attentionBackwardPlan(SWIFTSHADER, { ...args(4096, 4096, 32), mask }, 'f32', 'f32'), { dq: 'blocked', dkdv: 'blocked' });
  assert.deepEqual(attentionBackwardPlan(H200, a, 'f16', 'f32'), aluBackwardPlan(H200, a, 'f16', 'f32'));
  assert.throws(() => attentionBackwardPlan({ ...SWIFTSHADER, maxStorageBuffers: 8 }, { ...args(4096, 4096, 32), mask }, 'f32', 'f32'),
    (e: Error) => e instanceof UnsupportedError && e.message === 'webgpu: a masked attention backward off the tensor cores binds 9 storage buffers in its dk/dv pass; swiftshader-like allows 8');
});

test('FoX and FPA plans: decode for few rows a group, tensor cores for f16 (forward, and backward with f16 dO), blocked where tiles fit (FPA with room for its state), tiled else or when a tile is forced', () => {
  const fox = (tq: number, tk: number, d: number, heads = 32, kvHeads = 32) => ({ batch: 1, heads, kvHeads, tq, tk, d, kvLength: tk, qOffset: tk - tq, scale: 1 / Math.sqrt(d) });
  assert.equal(modifierForwardPlan(H200, 'fox', fox(1, 4096, 64, 32, 8), 'f16'), 'decode');
  assert.equal(modifierForwardPlan(H200, 'fox', fox(4096, 4096, 64), 'f16'), 'tensor-cores');
  assert.equal(modifierForwardPlan(H200, 'fox', fox(4096, 4096, 64), 'f16', { tensorCores: false }), 'blocked');
  assert.equal(modifierForwardPlan(H200, 'fpa', fox(4096, 4096, 64), 'f16'), 'tensor-cores');
  assert.equal(modifierForwardPlan(H200, 'fpa', fox(4096, 4096, 64), 'f16', { tensorCores: false }), 'blocked');
  assert.equal(modifierForwardPlan(H200, 'fpa', fox(4096, 4096, 64), 'f32'), 'blocked', 'f32 inputs: no tensor cores');
  assert.equal(modifierForwardPlan(H200, 'fox', fox(4096, 4096, 64), 'f16', { tile: true }), 'tiled');
  assert.equal(modifierForwardPlan(H200, 'fox', fox(0, 4096, 64), 'f16'), 'tiled', 'no rows: the tiled kernel writes nothing');
  assert.equal(modifierForwardPlan(SWIFTSHADER, 'fpa', fox(300, 300, 128), 'f32'), 'tiled');
  assert.deepEqual(modifierBackwardPlan(H200, 'fox', fox(4096, 4096, 64), 'f32', 'f32'), { dq: 'blocked', dkdv: 'blocked' });
  assert.deepEqual(modifierBackwardPlan(H200, 'fox', fox(4096, 4096, 128), 'f16', 'f16'), { dq: 'tensor-cores', dkdv: 'tensor-cores' });
  assert.deepEqual(modifierBackwardPlan(H200, 'fox', fox(4096, 4096, 128), 'f16', 'f32'), { dq: 'blocked', dkdv: 'tiled' }, 'dO in f32: no tensor cores');
  assert.deepEqual(modifierBackwardPlan(H200, 'fox', fox(8, 4096, 128), 'f16', 'f16'), { dq: 'blocked', dkdv: 'blocked' }, 'fewer than 16 query rows');
  assert.deepEqual(modifierBackwardPlan(H200, 'fox', fox(4096, 4096, 128), 'f16', 'f16', { tensorCores: false }), { dq: 'blocked', dkdv: 'blocked' });
  assert.deepEqual(modifierBackwardPlan(H200, 'fpa', fox(4096, 4096, 64), 'f16', 'f16'), { dq: 'tensor-cores', dkdv: 'tensor-cores' });
  assert.deepEqual(modifierBackwardPlan(H200, 'fpa', fox(4096, 4096, 64), 'f16', 'f32'), { dq: 'blocked', dkdv: 'blocked' }, 'FPA, dO in f32: no tensor cores');
  assert.deepEqual(modifierBackwardPlan(H200, 'fpa', fox(4096, 4096, 64), 'f32', 'f32', { tile: true }), { dq: 'tiled', dkdv: 'tiled' });
  assert.deepEqual(modifierBackwardPlan(SWIFTSHADER, 'fox', fox(300, 300, 128), 'f16', 'f16'), { dq: 'tiled', dkdv: 'tiled' });
  // 32 KiB of workgroup memory: at head dim 160 the tensor-core passes fit with FoX's scratch, not with FPA's.
  const SMALL_SMEM: GpuCaps = { ...base, maxWorkgroupStorage: 32768, adapterName: 'mma-32k' };
  assert.deepEqual(modifierBackwardPlan(SMALL_SMEM, 'fox', fox(4096, 4096, 160), 'f16', 'f16'), { dq: 'tensor-cores', dkdv: 'tensor-cores' });
  assert.deepEqual(modifierBackwardPlan(SMALL_SMEM, 'fpa', fox(4096, 4096, 160), 'f16', 'f16'), { dq: 'tiled', dkdv: 'tiled' }, 'FPA\'s scratch does not fit beside the tiles');
  assert.deepEqual(modifierBackwardPlan(SMALL_SMEM, 'fpa', fox(4096, 4096, 144), 'f16', 'f16'), { dq: 'tensor-cores', dkdv: 'tensor-cores' });
});
