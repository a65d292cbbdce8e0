/**
 * The loader fuzzer in CI (dev/fuzz/loader_fuzz.ts): malformed FON run folders, Hugging Face
 * folders (single and sharded), and every file in them — safetensors, tokenizer.json, config.json,
 * generation_config.json, trainer.json, latest.json, the shard index — each loaded in-process
 * under a time and heap limit, some also through `fon info`. Every case must load or give a
 * FonError with a bounded message; never a plain error, a hang, an out-of-memory or a stack trace.
 * dev/fuzz/loaders.ts runs many more cases and prints the counts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fuzzLoaders } from '../../dev/fuzz/loader_fuzz.ts';

test('loader fuzz, seed 18: 1,500 malformed folders load or give a FonError; 10 of them also through the CLI', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'fon-fuzz-'));
  try {
    const report = await fuzzLoaders({ cases: 1500, seed: 18, dir, cliEvery: 150 });
    const show = report.defects.slice(0, 5).map((d) => `#${d.index} ${d.description.slice(0, 120)} → ${d.outcomeClass}: ${d.detail.slice(0, 200)}`);
    assert.deepEqual(show, []);
    const total = Object.values(report.counts).reduce((a, b) => a + b, 0);
    assert.equal(total, 1500);
    const cli = Object.entries(report.counts).filter(([k]) => k.includes('(CLI: exit')).reduce((a, [, n]) => a + n, 0);
    assert.equal(cli, 10);
    assert.ok((report.counts.loaded ?? 0) > 0 && Object.keys(report.counts).length > 4, `the mutations reach past the first check: ${JSON.stringify(report.counts)}`);
    t.diagnostic(JSON.stringify(report.counts));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
