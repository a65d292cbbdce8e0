/**
 * Plots of the benchmarks' JSON results: time against sequence length, log-log, as SVG text
 * (src/io/plot_svg.ts). One builder per results kind, each a pure function from the parsed JSON to
 * named SVGs; `writeResultsPlots` at the end puts them on disk beside the JSON (or in a folder),
 * for bench/plot.ts and for the benches' own --json output.
 *
 * - bench/attention.ts: one plot per op (prefill forward, prefill forward+backward, decode), FON
 *   against PyTorch SDPA.
 * - bench/fox_fpa.ts: per head dim, prefill forward and forward+backward of FON's full, FoX and FPA
 *   attention beside PyTorch SDPA (and the plain PyTorch FoX); decode ms/step of one FPA layer with
 *   and without eviction beside SDPA decode; and the KV-cache bytes a decode step reads.
 *
 * A cell a case did not produce (an error, null, absent) is left out of its series; a series with no
 * cell left is dropped, and so is a plot with no series left.
 */
import { ArgumentError } from '../../src/errors.ts';
import { linePlot, type PlotSeries } from '../../src/io/plot_svg.ts';
import { baseName, joinPath, makeDir, parentDir, writeFileAtomic } from '../../src/platform/files.ts';

/** One plot of a results file; `name` becomes the file-name suffix (`<results base>-<name>.svg`). */
export interface NamedPlot {
  name: string;
  svg: string;
}

/** A row of bench/attention.ts: FON's time and, where PyTorch ran, SDPA's, for one op and length. */
export interface AttentionRow {
  key: string;
  op: string;
  tokens: number;
  ms?: number | null;
  torchMs?: number | null;
}

/** What bench/attention.ts writes with --json (the fields the plots use). */
export interface AttentionResults {
  date: string;
  adapter: string;
  shapes?: { batch?: number; heads?: number; kvHeadsDecode?: number; headDim?: number };
  rows: AttentionRow[];
}

/** A mechanism's prefill cell in bench/fox_fpa.ts: a time, or the reason there is none. */
export type FoxFpaCell = { ms: number; tflops?: number } | { error: string } | null;

export interface FoxFpaPrefillRow {
  key: string;
  op: string;
  headDim: number;
  tokens: number;
  fon?: Partial<Record<'full' | 'fox' | 'fpa', FoxFpaCell>>;
  sdpaMs?: number | null;
  plainFoxMs?: number | null;
}

export interface FoxFpaDecodeRow {
  key: string;
  headDim: number;
  context: number;
  evict: boolean;
  fon?: { ms: number; bytes?: number } | null;
  sdpaMs?: number | null;
}

/** What bench/fox_fpa.ts writes with --json (the fields the plots use). */
export interface FoxFpaResults {
  date: string;
  adapter: string;
  shapes?: { batch?: number; heads?: number; tau?: number };
  prefill: FoxFpaPrefillRow[];
  decode: FoxFpaDecodeRow[];
}

export type BenchResults = { kind: 'attention'; results: AttentionResults } | { kind: 'fox_fpa'; results: FoxFpaResults };

const SIZE = { width: 920, height: 440 };

/** `x` when it is a finite number above 0 (a time or a length that a log axis can draw), else undefined. */
function positive(x: unknown): number | undefined {
  return typeof x === 'number' && Number.isFinite(x) && x > 0 ? x : undefined;
}

/** "<machine>, <day>": the adapter's name with runs of spaces collapsed and the date's day (ISO) or the date as given. */
function machineAndDate(r: { adapter: string; date: string }): string {
  const day = /^\d{4}-\d{2}-\d{2}T/.test(r.date) ? r.date.slice(0, 10) : r.date;
  return `${r.adapter.replace(/\s+/g, ' ').trim()}, ${day}`;
}

/** A series of the points whose x and y both exist, sorted by x; null when none does. */
function series(name: string, points: readonly (readonly [number | undefined, number | undefined])[]): PlotSeries | null {
  const kept = points.filter((p): p is [number, number] => p[0] !== undefined && p[1] !== undefined).sort((a, b) => a[0] - b[0]);
  return kept.length ? { name, points: kept } : null;
}

/** A log-log plot of the non-null series, or null when none is left. */
function logLogPlot(name: string, title: string, xLabel: string, yLabel: string, all: (PlotSeries | null)[]): NamedPlot | null {
  const kept = all.filter((s): s is PlotSeries => s !== null);
  if (kept.length === 0) return null;
  return { name, svg: linePlot({ title, xLabel, yLabel, series: kept, logX: true, logY: true, markers: true, ...SIZE }) };
}

/** The distinct values of `xs` in order of first appearance. */
const distinct = <T>(xs: readonly T[]): T[] => [...new Set(xs)];

const ATTENTION_OPS: Record<string, string> = {
  prefill: 'causal prefill, forward',
  prefill_fwd_bwd: 'causal prefill, forward+backward',
  decode: 'decode, one query',
};

/** bench/attention.ts results: one plot per op, named after the op, FON and PyTorch SDPA ms against length. */
export function attentionPlots(r: AttentionResults): NamedPlot[] {
  const sh = r.shapes ?? {};
  const plots: (NamedPlot | null)[] = distinct(r.rows.map((x) => x.op)).map((op) => {
    const rows = r.rows.filter((x) => x.op === op);
    const decode = op === 'decode';
    const heads = decode && sh.kvHeadsDecode !== undefined ? `H=${sh.heads}/${sh.kvHeadsDecode}` : `H=${sh.heads}`;
    const shape = sh.heads !== undefined && sh.headDim !== undefined ? ` (B=${sh.batch ?? 1}, ${heads}, D=${sh.headDim})` : '';
    return logLogPlot(
      op,
      `Attention ${ATTENTION_OPS[op] ?? op}${shape} — ${machineAndDate(r)}`,
      decode ? 'cached tokens' : 'sequence length (tokens)',
      decode ? 'milliseconds per step' : 'milliseconds per call',
      [
        series('FON (WebGPU, f16)', rows.map((x) => [positive(x.tokens), positive(x.ms)])),
        series(decode ? 'PyTorch SDPA decode (bf16)' : 'PyTorch SDPA (bf16)', rows.map((x) => [positive(x.tokens), positive(x.torchMs)])),
      ],
    );
  });
  return plots.filter((p): p is NamedPlot => p !== null);
}

const MECHANISMS = [['full', 'FON full'], ['fox', 'FON FoX'], ['fpa', 'FON FPA']] as const;

/** A prefill cell's ms, when the case produced one. */
function cellMs(c: FoxFpaCell | undefined): number | undefined {
  return c && typeof c === 'object' && 'ms' in c ? positive(c.ms) : undefined;
}

/**
 * bench/fox_fpa.ts results, per head dim D: `prefill-dD` and `fwdbwd-dD` (ms against length per
 * mechanism, SDPA and plain PyTorch FoX), `decode-dD` (ms/step against context with and without
 * eviction, SDPA decode) and `decode-cache-dD` (MiB of KV cache a step reads).
 */
export function foxFpaPlots(r: FoxFpaResults): NamedPlot[] {
  const where = machineAndDate(r);
  const heads = r.shapes?.heads !== undefined ? `H=${r.shapes.heads}, ` : '';
  const evicted = `FON FPA, eviction${r.shapes?.tau !== undefined ? ` τ=${r.shapes.tau}` : ''}`;
  const dims = distinct([...r.prefill.map((x) => x.headDim), ...r.decode.map((x) => x.headDim)]).sort((a, b) => a - b);
  const plots: (NamedPlot | null)[] = [];
  for (const d of dims) {
    for (const [op, name, what] of [['prefill', 'prefill', 'forward'], ['prefill_fwd_bwd', 'fwdbwd', 'forward+backward']] as const) {
      const rows = r.prefill.filter((x) => x.headDim === d && x.op === op);
      const len = (x: FoxFpaPrefillRow) => positive(x.tokens);
      plots.push(logLogPlot(
        `${name}-d${d}`,
        `FoX / FPA causal prefill, ${what} (${heads}D=${d}) — ${where}`,
        'sequence length (tokens)', 'milliseconds per call',
        [
          ...MECHANISMS.map(([m, label]) => series(`${label} (WebGPU, f16)`, rows.map((x) => [len(x), cellMs(x.fon?.[m])]))),
          series('PyTorch SDPA (bf16)', rows.map((x) => [len(x), positive(x.sdpaMs)])),
          series('PyTorch FoX, plain T×T (bf16)', rows.map((x) => [len(x), positive(x.plainFoxMs)])),
        ],
      ));
    }
    const rows = r.decode.filter((x) => x.headDim === d);
    const ctx = (x: FoxFpaDecodeRow) => positive(x.context);
    const keep = rows.filter((x) => !x.evict), evict = rows.filter((x) => x.evict);
    // SDPA decode does not evict: both rows of a context carry the same figure, so take one per context.
    const sdpa = distinct(rows.map((x) => x.context)).map((t) => [positive(t), positive(rows.find((x) => x.context === t && positive(x.sdpaMs))?.sdpaMs)] as const);
    plots.push(logLogPlot(
      `decode-d${d}`,
      `FPA decode, one layer (${heads}D=${d}) — ${where}`,
      'cached context (tokens)', 'milliseconds per step',
      [
        series('FON FPA, no eviction', keep.map((x) => [ctx(x), positive(x.fon?.ms)])),
        series(evicted, evict.map((x) => [ctx(x), positive(x.fon?.ms)])),
        series('PyTorch SDPA decode (bf16)', sdpa),
      ],
    ));
    const mib = (x: FoxFpaDecodeRow) => { const b = positive(x.fon?.bytes); return b === undefined ? undefined : b / 2 ** 20; };
    plots.push(logLogPlot(
      `decode-cache-d${d}`,
      `FPA decode, KV cache in use (${heads}D=${d}) — ${where}`,
      'cached context (tokens)', 'KV cache (MiB)',
      [
        series('FON FPA, no eviction', keep.map((x) => [ctx(x), mib(x)])),
        series(evicted, evict.map((x) => [ctx(x), mib(x)])),
      ],
    ));
  }
  return plots.filter((p): p is NamedPlot => p !== null);
}

const EXPECTED = 'expected the JSON of bench/attention.ts ({ date, adapter, rows: [{ op, tokens, ms, torchMs }] }) '
  + 'or of bench/fox_fpa.ts ({ date, adapter, prefill: [{ op, headDim, tokens, fon, sdpaMs }], decode: [{ headDim, context, evict, fon, sdpaMs }] })';

const isObject = (x: unknown): x is Record<string, unknown> => typeof x === 'object' && x !== null && !Array.isArray(x);

/**
 * Which benchmark wrote `value` (parsed JSON read from `source`, named in errors), told by its
 * shape; ArgumentError when it is neither kind or a row lacks a field the plots need.
 */
export function parseBenchResults(value: unknown, source: string): BenchResults {
  const fail = (why: string): never => { throw new ArgumentError(`${source}: ${why}; ${EXPECTED}`); };
  if (!isObject(value)) return fail(`not a bench results file (the JSON is ${Array.isArray(value) ? 'an array' : value === null ? 'null' : `a ${typeof value}`})`);
  const kind = Array.isArray(value.rows) ? 'attention' : Array.isArray(value.prefill) && Array.isArray(value.decode) ? 'fox_fpa' : null;
  if (kind === null) return fail(`not a bench results file (top-level keys: ${Object.keys(value).join(', ') || 'none'})`);
  for (const f of ['date', 'adapter']) if (typeof value[f] !== 'string') fail(`'${f}' is ${JSON.stringify(value[f]) ?? 'missing'}, expected a string`);
  const need = (list: string, rows: unknown[], fields: Record<string, 'string' | 'number' | 'boolean'>) => rows.forEach((row, i) => {
    if (!isObject(row)) return fail(`${list}[${i}] is not an object`);
    for (const [f, type] of Object.entries(fields)) {
      if (typeof row[f] !== type) fail(`${list}[${i}].${f} is ${JSON.stringify(row[f]) ?? 'missing'}, expected a ${type}`);
    }
  });
  if (kind === 'attention') {
    need('rows', value.rows as unknown[], { op: 'string', tokens: 'number' });
    return { kind, results: value as unknown as AttentionResults };
  }
  need('prefill', value.prefill as unknown[], { op: 'string', headDim: 'number', tokens: 'number' });
  need('decode', value.decode as unknown[], { headDim: 'number', context: 'number', evict: 'boolean' });
  return { kind, results: value as unknown as FoxFpaResults };
}

/** The plots of a results file of either kind. */
export function benchPlots(value: unknown, source: string): NamedPlot[] {
  const r = parseBenchResults(value, source);
  return r.kind === 'attention' ? attentionPlots(r.results) : foxFpaPlots(r.results);
}

/**
 * Writes the plots of `value` (the JSON at or bound for `jsonPath`) as `<base>-<plot>.svg` in
 * `outDir` (default: beside the JSON), each atomically; returns the paths written, in plot order.
 */
export async function writeResultsPlots(jsonPath: string, value: unknown, outDir = parentDir(jsonPath)): Promise<string[]> {
  const plots = benchPlots(value, jsonPath);
  const base = baseName(jsonPath).replace(/\.json$/i, '');
  await makeDir(outDir);
  const paths: string[] = [];
  for (const p of plots) {
    const path = joinPath(outDir, `${base}-${p.name}.svg`);
    await writeFileAtomic(path, p.svg);
    paths.push(path);
  }
  return paths;
}

/**
 * For a bench's --json: writes the plots beside the JSON just written and prints their paths. A
 * failure is printed, not thrown, so the run still ends cleanly with its JSON in place.
 */
export async function writePlotsBeside(jsonPath: string, results: unknown): Promise<void> {
  try {
    const paths = await writeResultsPlots(jsonPath, results);
    console.log(paths.length ? `\nplots: ${paths.join(', ')}` : '\n(no plots: no case has a time)');
  } catch (e) {
    console.error(`(plots not written: ${(e as Error).message})`);
  }
}
