/**
 * Bench result plots (bench/lib/plots.ts, bench/plot.ts): for synthetic results of each kind, the
 * plots named, a polyline per series with the points that exist (missing and failed cells left
 * out), log-spaced axes, titles naming the machine and date; the unknown-kind error; the files the
 * writer and the CLI put on disk.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ArgumentError } from '../../src/errors.ts';
import {
  attentionPlots, benchPlots, foxFpaPlots, parseBenchResults, writeResultsPlots,
  type AttentionResults, type FoxFpaResults, type NamedPlot,
} from '../../bench/lib/plots.ts';

/** Each series polyline of an SVG: its legend name and its points in screen coordinates. */
function polylines(svg: string): { name: string; points: [number, number][] }[] {
  return [...svg.matchAll(/<polyline class="series" data-name="([^"]*)"[^>]* points="([^"]*)"\/>/g)].map((m) => ({
    name: m[1],
    points: m[2].split(' ').map((p) => p.split(',').map(Number) as [number, number]),
  }));
}

/** Series name → number of points, for the plot called `name`. */
function counts(plots: NamedPlot[], name: string): Record<string, number> {
  const p = plots.find((x) => x.name === name);
  assert.ok(p, `no plot '${name}' among ${plots.map((x) => x.name).join(', ')}`);
  return Object.fromEntries(polylines(p.svg).map((s) => [s.name, s.points.length]));
}

const svgOf = (plots: NamedPlot[], name: string) => plots.find((x) => x.name === name)!.svg;

const ADAPTER = 'acme  gpu-9000 <rev&2>';
const DATE = '2026-01-02T03:04:05.000Z';

function attentionResults(): AttentionResults {
  return {
    date: DATE, adapter: ADAPTER,
    shapes: { batch: 1, heads: 32, kvHeadsDecode: 8, headDim: 128 },
    rows: [
      // Out of order on purpose: the series sorts by length.
      { key: 'prefill-4096', op: 'prefill', tokens: 4096, ms: 8, torchMs: 0.4 },
      { key: 'prefill-1024', op: 'prefill', tokens: 1024, ms: 1, torchMs: 0.1 },
      { key: 'prefill-2048', op: 'prefill', tokens: 2048, ms: 3, torchMs: 0.2 },
      { key: 'prefill-8192', op: 'prefill', tokens: 8192, ms: null, torchMs: 1.6 },
      { key: 'fwdbwd-1024', op: 'prefill_fwd_bwd', tokens: 1024, ms: 30 },
      { key: 'fwdbwd-2048', op: 'prefill_fwd_bwd', tokens: 2048, ms: 120 },
      { key: 'decode-4096', op: 'decode', tokens: 4096, ms: 0.07, torchMs: 0.03 },
      { key: 'decode-65536', op: 'decode', tokens: 65536, ms: 0.2 },
    ],
  };
}

test('attention: one log-log plot per op, FON and PyTorch series with the cells that exist', () => {
  const plots = attentionPlots(attentionResults());
  assert.deepEqual(plots.map((p) => p.name), ['prefill', 'prefill_fwd_bwd', 'decode']);
  // prefill-8192 has no FON time; fwd+bwd has no PyTorch time at all, so no PyTorch series.
  assert.deepEqual(counts(plots, 'prefill'), { 'FON (WebGPU, f16)': 3, 'PyTorch SDPA (bf16)': 4 });
  assert.deepEqual(counts(plots, 'prefill_fwd_bwd'), { 'FON (WebGPU, f16)': 2 });
  assert.deepEqual(counts(plots, 'decode'), { 'FON (WebGPU, f16)': 2, 'PyTorch SDPA decode (bf16)': 1 });
  const prefill = svgOf(plots, 'prefill');
  // The machine (escaped, spaces collapsed) and the day are in the title; units in the axis labels.
  assert.match(prefill, /<title>Attention causal prefill, forward \(B=1, H=32, D=128\) — acme gpu-9000 &lt;rev&amp;2&gt;, 2026-01-02<\/title>/);
  assert.match(prefill, /class="x-label"[^>]*>sequence length \(tokens\) \(log\)</);
  assert.match(prefill, /class="y-label"[^>]*>milliseconds per call \(log\)</);
  assert.match(svgOf(plots, 'decode'), /H=32\/8, D=128\) —/);
  assert.match(svgOf(plots, 'decode'), /class="y-label"[^>]*>milliseconds per step \(log\)</);
});

test('attention: both axes are logarithmic (doubling lengths and times are evenly spaced)', () => {
  const [fon] = polylines(svgOf(attentionPlots(attentionResults()), 'prefill'));
  // Lengths 1024, 2048, 4096: equal steps in x, increasing.
  const dx = fon.points.slice(1).map((p, i) => p[0] - fon.points[i][0]);
  assert.ok(dx[0] > 0 && Math.abs(dx[0] - dx[1]) < 0.05, `x steps ${dx}`);
  // Times 1, 3, 8 ms: screen y steps in the ratio log(3) : log(8/3) (y grows downwards).
  const dy = fon.points.slice(1).map((p, i) => fon.points[i][1] - p[1]);
  assert.ok(Math.abs(dy[0] / dy[1] - Math.log(3) / Math.log(8 / 3)) < 1e-3, `y steps ${dy}`);
});

test('attention: an op with no time in any cell gets no plot; unknown ops are plotted under their own name', () => {
  const r = attentionResults();
  r.rows = r.rows.filter((x) => x.op !== 'prefill').map((x) => (x.op === 'decode' ? { ...x, ms: null, torchMs: undefined } : x));
  r.rows.push({ key: 'mystery-512', op: 'mystery', tokens: 512, ms: 2 });
  const plots = attentionPlots(r);
  assert.deepEqual(plots.map((p) => p.name), ['prefill_fwd_bwd', 'mystery']);
  assert.match(svgOf(plots, 'mystery'), /<title>Attention mystery \(/);
});

function foxFpaResults(): FoxFpaResults {
  const cell = (ms: number) => ({ ms, tflops: 1 });
  return {
    date: DATE, adapter: ADAPTER,
    shapes: { batch: 1, heads: 16, tau: 16 },
    prefill: [
      { key: 'prefill-d128-4096', op: 'prefill', headDim: 128, tokens: 4096, fon: { full: cell(3), fox: cell(90), fpa: cell(100) }, sdpaMs: 0.15, plainFoxMs: 5.8 },
      { key: 'prefill-d128-8192', op: 'prefill', headDim: 128, tokens: 8192, fon: { full: cell(17), fox: { error: 'DeviceError: out of memory' }, fpa: null }, sdpaMs: 0.5 },
      { key: 'prefill-d128-16384', op: 'prefill', headDim: 128, tokens: 16384, fon: { full: cell(48), fox: cell(1385) } },
      { key: 'fwdbwd-d128-4096', op: 'prefill_fwd_bwd', headDim: 128, tokens: 4096, fon: { full: cell(287), fox: cell(379), fpa: cell(390) }, sdpaMs: 0.6, plainFoxMs: 12 },
      { key: 'prefill-d64-4096', op: 'prefill', headDim: 64, tokens: 4096, fon: { fpa: cell(32) }, sdpaMs: 0.1 },
    ],
    decode: [
      { key: 'decode-d128-4096', headDim: 128, context: 4096, evict: false, sdpaMs: 0.028, fon: { ms: 7.6, bytes: 2 ** 25 } },
      { key: 'decode-d128-4096-evict', headDim: 128, context: 4096, evict: true, sdpaMs: 0.028, fon: { ms: 5.6, bytes: 2 ** 23 } },
      { key: 'decode-d128-16384', headDim: 128, context: 16384, evict: false, sdpaMs: 0.039, fon: { ms: 24, bytes: 2 ** 27 } },
      { key: 'decode-d128-16384-evict', headDim: 128, context: 16384, evict: true, sdpaMs: 0.039, fon: null },
      { key: 'decode-d128-65536', headDim: 128, context: 65536, evict: false, fon: { ms: 90 } },
    ],
  };
}

test('fox_fpa: per head dim, prefill per mechanism beside SDPA, decode with and without eviction beside SDPA', () => {
  const plots = foxFpaPlots(foxFpaResults());
  // D=64 has neither fwd+bwd nor decode rows: only its prefill plot.
  assert.deepEqual(plots.map((p) => p.name), ['prefill-d64', 'prefill-d128', 'fwdbwd-d128', 'decode-d128', 'decode-cache-d128']);
  assert.deepEqual(counts(plots, 'prefill-d64'), { 'FON FPA (WebGPU, f16)': 1, 'PyTorch SDPA (bf16)': 1 });
  // The error cell, the null cell and the missing FPA / SDPA cells at 16384 are left out.
  assert.deepEqual(counts(plots, 'prefill-d128'), {
    'FON full (WebGPU, f16)': 3, 'FON FoX (WebGPU, f16)': 2, 'FON FPA (WebGPU, f16)': 1,
    'PyTorch SDPA (bf16)': 2, 'PyTorch FoX, plain T×T (bf16)': 1,
  });
  assert.equal(Object.keys(counts(plots, 'fwdbwd-d128')).length, 5);
  // SDPA decode appears once per context, not once per evict / keep row.
  assert.deepEqual(counts(plots, 'decode-d128'), { 'FON FPA, no eviction': 3, 'FON FPA, eviction τ=16': 1, 'PyTorch SDPA decode (bf16)': 2 });
  // The 65536 row has no bytes: two points without eviction.
  assert.deepEqual(counts(plots, 'decode-cache-d128'), { 'FON FPA, no eviction': 2, 'FON FPA, eviction τ=16': 1 });
  assert.match(svgOf(plots, 'fwdbwd-d128'), /<title>FoX \/ FPA causal prefill, forward\+backward \(H=16, D=128\) — acme gpu-9000 &lt;rev&amp;2&gt;, 2026-01-02<\/title>/);
  assert.match(svgOf(plots, 'decode-d128'), /class="x-label"[^>]*>cached context \(tokens\) \(log\)</);
  assert.match(svgOf(plots, 'decode-d128'), /class="y-label"[^>]*>milliseconds per step \(log\)</);
  assert.match(svgOf(plots, 'decode-cache-d128'), /class="y-label"[^>]*>KV cache \(MiB\) \(log\)</);
  // Cache 32 MiB and 128 MiB: log y puts 4096 → 16384 (×4) at the same height step as any other ×4.
  const [keep] = polylines(svgOf(plots, 'decode-cache-d128'));
  const [evict] = polylines(svgOf(plots, 'decode-cache-d128')).slice(1);
  assert.ok(Math.abs((keep.points[0][1] - keep.points[1][1]) - (evict.points[0][1] - keep.points[0][1])) < 0.05);
});

test('an unknown results kind is an ArgumentError naming the file and both expected shapes', () => {
  const expected = /expected the JSON of bench\/attention\.ts \(\{ date, adapter, rows: .*\) or of bench\/fox_fpa\.ts \(\{ date, adapter, prefill: .*, decode: .*\)$/;
  assert.throws(() => parseBenchResults({ name: 'fon', scripts: {} }, 'package.json'), (e: unknown) => {
    assert.ok(e instanceof ArgumentError);
    assert.match(e.message, /^package\.json: not a bench results file \(top-level keys: name, scripts\); /);
    assert.match(e.message, expected);
    return true;
  });
  assert.throws(() => benchPlots([1, 2], 'list.json'), { name: 'ArgumentError', message: /^list\.json: not a bench results file \(the JSON is an array\); / });
  assert.throws(() => benchPlots({ ...attentionResults(), adapter: 7 }, 'a.json'), { name: 'ArgumentError', message: /^a\.json: 'adapter' is 7, expected a string; / });
  const r = foxFpaResults() as unknown as { decode: Record<string, unknown>[] };
  delete r.decode[2].context;
  assert.throws(() => benchPlots(r, 'f.json'), { name: 'ArgumentError', message: /^f\.json: decode\[2\]\.context is missing, expected a number; / });
  assert.equal(parseBenchResults(attentionResults(), 'a.json').kind, 'attention');
  assert.equal(parseBenchResults(foxFpaResults(), 'f.json').kind, 'fox_fpa');
});

test('writeResultsPlots writes <base>-<plot>.svg atomically (no temporary left) and returns the paths', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'fon-plots-'));
  try {
    const out = join(dir, 'svg');
    const paths = await writeResultsPlots(join(dir, 'results_attention_x.json'), attentionResults(), out);
    assert.deepEqual(paths, ['prefill', 'prefill_fwd_bwd', 'decode'].map((p) => join(out, `results_attention_x-${p}.svg`)));
    assert.deepEqual(readdirSync(out).sort(), paths.map((p) => p.slice(out.length + 1)).sort());
    assert.equal(readFileSync(paths[0], 'utf8'), attentionPlots(attentionResults())[0].svg);
    // Default folder: beside the JSON.
    const beside = await writeResultsPlots(join(dir, 'ff.json'), foxFpaResults());
    assert.equal(beside[0], join(dir, 'ff-prefill-d64.svg'));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('bench/plot.ts: prints the paths it wrote; a file of unknown kind is one line on stderr and exit code 1', () => {
  const dir = mkdtempSync(join(tmpdir(), 'fon-plot-cli-'));
  const cli = (...args: string[]) => spawnSync(process.execPath, ['--import', 'tsx', join(import.meta.dirname, '../../bench/plot.ts'), ...args], { encoding: 'utf8', timeout: 120_000 });
  try {
    writeFileSync(join(dir, 'ok.json'), JSON.stringify(foxFpaResults()));
    const ok = cli(join(dir, 'ok.json'), '--out', join(dir, 'o'));
    assert.equal(ok.status, 0, ok.stderr);
    assert.deepEqual(ok.stdout.trim().split('\n'), ['prefill-d64', 'prefill-d128', 'fwdbwd-d128', 'decode-d128', 'decode-cache-d128'].map((p) => join(dir, 'o', `ok-${p}.svg`)));

    writeFileSync(join(dir, 'other.json'), JSON.stringify({ loss: [1, 2] }));
    const bad = cli(join(dir, 'other.json'));
    assert.equal(bad.status, 1);
    assert.equal(bad.stdout, '');
    assert.equal(bad.stderr.trim().split('\n').length, 1, bad.stderr);
    assert.ok(bad.stderr.startsWith(`plot: ${join(dir, 'other.json')}: not a bench results file (top-level keys: loss); expected the JSON of bench/attention.ts`), bad.stderr);

    writeFileSync(join(dir, 'broken.json'), '{ "rows": [');
    const broken = cli(join(dir, 'broken.json'));
    assert.equal(broken.status, 1);
    assert.match(broken.stderr, /^plot: .*broken\.json is not JSON \(/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
