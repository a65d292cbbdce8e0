/**
 * Draft–revise decoding on the wasm and webgpu backends: greedy output token-identical to plain
 * greedy decoding of the same model on the same backend, for every mechanism of the fixtures
 * (fewer prompts than the CPU test, and on webgpu four of the mechanisms: SwiftShader is slow).
 * test/infer/draft_revise.test.ts has the CPU suite.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fon from '../../src/index.ts';
import '../../src/backend/wasm/index.ts';
import type { Backend } from '../../src/index.ts';
import { generate } from '../../src/infer/generate.ts';
import { byteTokenizer } from '../../src/io/tokenizer/tokenizer.ts';
import { exitAfterWebgpu, webgpuOrSkip, webgpuSkipReason } from '../backend/webgpu_setup.ts';
import { loudModel, ORGAN_CASES, organsConfig } from './organs_fixtures.ts';

const tok = byteTokenizer();
const wasm = await fon.initBackend('wasm');
const gpu = await webgpuOrSkip();
exitAfterWebgpu();

async function greedyEqual(backend: Backend, name: string, prompts: string[], maxTokens: number): Promise<void> {
  const m = loudModel(organsConfig(ORGAN_CASES[name]), backend);
  let drafted = 0, accepted = 0;
  for (const prompt of prompts) {
    const plain = await generate(m, tok, prompt, { temperature: 0, maxTokens, draftRevise: false });
    const dr = await generate(m, tok, prompt, { temperature: 0, maxTokens, draftRevise: { draftLayers: 1, gamma: 3 } });
    assert.deepEqual(dr.ids, plain.ids, `${backend.name}, ${name}, prompt ${JSON.stringify(prompt)}`);
    drafted += dr.speculative!.drafted;
    accepted += dr.speculative!.accepted;
  }
  assert.ok(accepted > 0 && accepted < drafted, `${name}: accepted ${accepted} of ${drafted}`);
  m.dispose();
}

const WEBGPU_CASES = ['full', 'fox+tokenShift', 'fpa evict', 'mixed + depth'];

for (const name of Object.keys(ORGAN_CASES)) {
  test(`draft–revise greedy equals plain greedy on wasm: ${name}`, async () => {
    await greedyEqual(wasm, name, Array.from({ length: 12 }, (_, i) => `a mat ${i}`), 12);
  });
  // On webgpu the mechanisms whose decode paths differ most (paged full, token shift, FPA eviction, a mixed depth stack); the CPU and wasm suites take every one.
  if (!WEBGPU_CASES.includes(name)) continue;
  test(`draft–revise greedy equals plain greedy [webgpu]: ${name}`, { skip: webgpuSkipReason() }, async () => {
    await greedyEqual(gpu!, name, ['The jury', 'said it', 'a mat 3'], 10);
  });
}
