/**
 * Malformed-input cases for FON's loaders, made from valid folders by one seeded mutation each.
 *
 * A case is (seed, index) → a copy of one base folder (a FON run folder with its checkpoint, a
 * single-file Hugging Face folder, a sharded one) with one of its files mutated: JSON files get a
 * key deleted, a value replaced by a hostile one (wrong types, huge or non-integer numbers, deep
 * nesting, long strings, prototype keys, hostile regexes and names), an unknown key, or their text
 * cut, flipped or emptied; safetensors files get cut, flipped bytes, a wrong header length, a
 * mutated header, a prototype-key tensor name, NaN data; any file can become a folder, a link
 * loop, a link to /dev/null or /dev/zero, or vanish. The same (seed, index) always gives the same
 * case, so a failure can be replayed (dev/fuzz/loaders.ts --only INDEX).
 *
 * `runCase` loads the case as FON would and classifies what happened: loaded, a FonError (which
 * subclass), or anything else, which is a defect.
 */
import { cpSync, mkdirSync, readFileSync, readdirSync, rmSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { initBackend } from '../../src/backend/registry.ts';
import { FonError } from '../../src/errors.ts';
import { resolveCheckpointDir } from '../../src/io/checkpoint_dir.ts';
import { loadModel, loadOptimizerState, readTrainerState } from '../../src/io/model_checkpoint.ts';
import { uniformStream } from '../../src/ops/random.ts';
import { AdamW } from '../../src/train/optim.ts';
import { parseTrainConfig } from '../../src/train/trainer.ts';

/** The valid folders cases start from: name → path (made by dev/fuzz/loader_bases.ts). */
export type Bases = Record<'checkpoint' | 'hfSingle' | 'hfSharded', string>;

export interface LoaderCase {
  index: number;
  /** What was done, enough to see the case without replaying it. */
  description: string;
  /** The folder to load. */
  folder: string;
  /** Which base it came from. */
  base: keyof Bases;
}

/** JSON text fragments put in place of a value: each is valid JSON that a loader must refuse or survive. */
const HOSTILE_VALUES: readonly string[] = [
  'null', 'true', 'false', '0', '-1', '1.5', '1e308', '-1e308', '9007199254740993', '100000000000000000000', '2097152', '1024', '65536',
  '""', '"x"', '[]', '{}', '[1]', '{"a":1}', `${'['.repeat(5000)}${']'.repeat(5000)}`, `${'{"a":'.repeat(3000)}1${'}'.repeat(3000)}`,
  '{"__proto__":{"polluted":1}}', '{"constructor":1,"toString":2}', `"${'a'.repeat(200_000)}"`, '"<|im-start|>"', '"(a+)+$"', '"(a|a)*"',
  '"../../../etc/passwd"', '"a\\u0000b"', '"step-000001\\u0000"', '"\\ud800"', '[-1, 2]', '[1e9, 1e9]', '{"Regex": "(x+x+)+y"}', '{"String": "a-b"}',
];

type JsonPath = (string | number)[];

/** A random path into a JSON value, biased to shallow nodes; [] is the root. */
function randomPath(v: unknown, rand: () => number): JsonPath {
  const path: JsonPath = [];
  let node = v;
  while (node !== null && typeof node === 'object' && (path.length === 0 || rand() < 0.6)) {
    const keys: (string | number)[] = Array.isArray(node) ? node.map((_, i) => i) : Object.keys(node);
    if (keys.length === 0) break;
    const k = keys[Math.floor(rand() * keys.length)];
    path.push(k);
    node = (node as Record<string | number, unknown>)[k];
  }
  return path;
}

const SENTINEL = '\u0001fuzz\u0001';

/** JSON text of `v` with the value at `path` replaced by the text `fragment`. */
function replaceAt(v: unknown, path: JsonPath, fragment: string): string {
  if (path.length === 0) return fragment;
  const copy = structuredClone(v) as Record<string | number, unknown>;
  let node = copy;
  for (const k of path.slice(0, -1)) node = node[k] as Record<string | number, unknown>;
  node[path[path.length - 1]] = SENTINEL;
  return JSON.stringify(copy).replace(JSON.stringify(SENTINEL), fragment);
}

/** One mutation of a JSON text; returns the new text and what was done. */
function mutateJson(text: string, rand: () => number): { text: string; what: string } {
  let v: unknown;
  try { v = JSON.parse(text); } catch { v = undefined; }
  const pick = rand();
  const pathText = (p: JsonPath) => (p.length ? p.map((k) => JSON.stringify(k)).join('.').slice(0, 80) : 'the root');
  if (v !== undefined && pick < 0.45) {
    const path = randomPath(v, rand);
    const fragment = HOSTILE_VALUES[Math.floor(rand() * HOSTILE_VALUES.length)];
    return { text: replaceAt(v, path, fragment), what: `${pathText(path)} = ${fragment.slice(0, 40)}${fragment.length > 40 ? `… (${fragment.length} chars)` : ''}` };
  }
  if (v !== undefined && pick < 0.6) {
    const path = randomPath(v, rand);
    if (path.length === 0) return { text: '', what: 'emptied' };
    const copy = structuredClone(v) as Record<string | number, unknown>;
    let node = copy;
    for (const k of path.slice(0, -1)) node = node[k] as Record<string | number, unknown>;
    const last = path[path.length - 1];
    if (Array.isArray(node)) node.splice(last as number, 1); else delete node[last];
    return { text: JSON.stringify(copy), what: `deleted ${pathText(path)}` };
  }
  if (v !== null && typeof v === 'object' && pick < 0.7) {
    const fragment = HOSTILE_VALUES[Math.floor(rand() * HOSTILE_VALUES.length)];
    const body = JSON.stringify(v);
    const isArray = Array.isArray(v);
    const extra = isArray ? fragment : `"fuzz_unknown_key":${fragment}`;
    const inner = body.slice(1, -1);
    return { text: `${body[0]}${inner}${inner.length ? ',' : ''}${extra}${body[body.length - 1]}`, what: `added ${isArray ? 'an item' : 'an unknown key'} ${fragment.slice(0, 40)}` };
  }
  if (pick < 0.8) {
    const at = Math.floor(rand() * text.length);
    return { text: text.slice(0, at), what: `cut at ${at} of ${text.length}` };
  }
  if (pick < 0.9) {
    const chars = [...text];
    const n = 1 + Math.floor(rand() * 4);
    for (let i = 0; i < n; i++) chars[Math.floor(rand() * chars.length)] = String.fromCharCode(Math.floor(rand() * 128));
    return { text: chars.join(''), what: `${n} characters replaced` };
  }
  if (pick < 0.95) return { text: `${text}${text}`, what: 'the text twice' };
  return { text: '\uFEFF' + text.replace(/"/, '"\\x'), what: 'a BOM and a bad escape' };
}

/** One mutation of a safetensors file's bytes. */
function mutateSafetensors(bytes: Uint8Array, rand: () => number): { bytes: Uint8Array; what: string } {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const headerLen = Number(view.getBigUint64(0, true));
  const headerText = new TextDecoder().decode(bytes.subarray(8, 8 + headerLen));
  const data = bytes.subarray(8 + headerLen);
  const withHeader = (text: string) => {
    const h = new TextEncoder().encode(text);
    const out = new Uint8Array(8 + h.length + data.length);
    new DataView(out.buffer).setBigUint64(0, BigInt(h.length), true);
    out.set(h, 8);
    out.set(data, 8 + h.length);
    return out;
  };
  const pick = rand();
  if (pick < 0.15) {
    const at = Math.floor(rand() * bytes.length);
    return { bytes: bytes.slice(0, at), what: `cut at byte ${at} of ${bytes.length}` };
  }
  if (pick < 0.3) {
    const out = bytes.slice();
    const inHeader = rand() < 0.5;
    const n = 1 + Math.floor(rand() * 8);
    for (let i = 0; i < n; i++) {
      const at = inHeader ? 8 + Math.floor(rand() * headerLen) : Math.floor(rand() * bytes.length);
      out[at] = Math.floor(rand() * 256);
    }
    return { bytes: out, what: `${n} bytes flipped${inHeader ? ' in the header' : ''}` };
  }
  if (pick < 0.42) {
    const lengths = [0n, 1n, 7n, BigInt(headerLen - 1), BigInt(headerLen + 1), BigInt(bytes.length), BigInt(bytes.length - 8), 2n ** 53n, 2n ** 64n - 1n, 100_000_001n];
    const len = lengths[Math.floor(rand() * lengths.length)];
    const out = bytes.slice();
    new DataView(out.buffer).setBigUint64(0, len, true);
    return { bytes: out, what: `header length set to ${len}` };
  }
  if (pick < 0.75) {
    const m = mutateJson(headerText, rand);
    return { bytes: withHeader(m.text), what: `header: ${m.what}` };
  }
  if (pick < 0.85) {
    const header = JSON.parse(headerText) as Record<string, unknown>;
    const names = Object.keys(header).filter((k) => k !== '__metadata__');
    const name = names[Math.floor(rand() * names.length)];
    const to = ['__proto__', 'constructor', 'toString', '', `${name}\u0000`, names[0]][Math.floor(rand() * 6)];
    const text = headerText.replace(JSON.stringify(name), JSON.stringify(to));
    return { bytes: withHeader(text), what: `tensor ${name} renamed ${JSON.stringify(to)}` };
  }
  if (pick < 0.93) {
    const header = JSON.parse(headerText) as Record<string, { dtype?: string; data_offsets?: [number, number] }>;
    const names = Object.keys(header).filter((k) => k !== '__metadata__');
    const name = names[Math.floor(rand() * names.length)];
    const t = header[name];
    const out = bytes.slice();
    const at = 8 + headerLen + (t.data_offsets?.[0] ?? 0);
    const nan = t.dtype === 'F32' ? [0x00, 0x00, 0xc0, 0x7f] : [0xc0, 0x7f];
    out.set(nan, at);
    return { bytes: out, what: `a NaN written into ${name} (${t.dtype})` };
  }
  const header = JSON.parse(headerText) as Record<string, { dtype?: string }>;
  const names = Object.keys(header).filter((k) => k !== '__metadata__');
  const name = names[Math.floor(rand() * names.length)];
  const dtype = ['F64', 'I64', 'BOOL', 'U8', 'Q4_0', 'F8_E4M3', 'f32', ''][Math.floor(rand() * 8)];
  header[name] = { ...header[name], dtype };
  return { bytes: withHeader(JSON.stringify(header)), what: `tensor ${name} given dtype ${JSON.stringify(dtype)}` };
}

/** The files of a folder, recursively, relative to it. */
function filesUnder(dir: string, prefix = ''): string[] {
  return readdirSync(join(dir, prefix), { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? filesUnder(dir, join(prefix, e.name)) : [join(prefix, e.name)]);
}

/** Makes case `index` of `seed` under `scratch` (emptied first). */
export function makeCase(seed: number, index: number, bases: Bases, scratch: string): LoaderCase {
  const rand = uniformStream((seed * 1_000_003 + index * 7919) >>> 0);
  const baseNames = Object.keys(bases) as (keyof Bases)[];
  const base = baseNames[Math.floor(rand() * baseNames.length)];
  rmSync(scratch, { recursive: true, force: true });
  mkdirSync(scratch, { recursive: true });
  const folder = join(scratch, 'case');
  cpSync(bases[base], folder, { recursive: true });
  const files = filesUnder(folder).filter((f) => !f.endsWith('.svg') && !f.endsWith('log.jsonl'));
  const file = files[Math.floor(rand() * files.length)];
  const path = join(folder, file);
  const pick = rand();
  let what: string;
  if (pick < 0.1) {
    const kind = Math.floor(rand() * 5);
    unlinkSync(path);
    if (kind === 0) { mkdirSync(path); what = 'made a folder'; }
    else if (kind === 1) { symlinkSync(path, path); what = 'made a link to itself'; }
    else if (kind === 2) { symlinkSync('/dev/null', path); what = 'made a link to /dev/null'; }
    else if (kind === 3) { symlinkSync('/dev/zero', path); what = 'made a link to /dev/zero'; }
    else what = 'removed';
  } else if (pick < 0.15) {
    const dir = join(folder, file.split('/')[0]);
    if (file.includes('/')) {
      rmSync(dir, { recursive: true });
      symlinkSync(dir, dir);
      what = `its folder ${file.split('/')[0]} made a link to itself`;
    } else { writeFileSync(path, ''); what = 'emptied'; }
  } else if (file.endsWith('.safetensors')) {
    const m = mutateSafetensors(new Uint8Array(readFileSync(path)), rand);
    writeFileSync(path, m.bytes);
    what = m.what;
  } else {
    const m = mutateJson(readFileSync(path, 'utf8'), rand);
    writeFileSync(path, m.text);
    what = m.what;
  }
  return { index, base, folder, description: `${base} ${file}: ${what}` };
}

/** What loading a case did. */
export type CaseOutcome =
  | { kind: 'loaded' }
  | { kind: 'FonError'; name: string; message: string }
  | { kind: 'other error'; name: string; message: string };

/**
 * Loads a case as the CLI would: the model and tokenizer (loadModel), and for a FON run folder
 * also the trainer state, its training settings and the optimizer moments (what --resume reads).
 */
export async function runCase(c: LoaderCase): Promise<CaseOutcome> {
  const cpu = await initBackend('cpu');
  try {
    const loaded = await loadModel(c.folder, cpu);
    try {
      if (c.base === 'checkpoint') {
        const dir = await resolveCheckpointDir(c.folder);
        const state = await readTrainerState(dir);
        parseTrainConfig((state.run as { train?: unknown }).train, `${dir}/trainer.json: run.train`);
        const opt = new AdamW(loaded.model.parameters(), { lr: 1e-3 });
        try { await loadOptimizerState(dir, state, opt, cpu); } finally { opt.dispose(); }
      }
    } finally {
      loaded.model.dispose();
    }
    return { kind: 'loaded' };
  } catch (e) {
    const err = e as Error;
    const message = String(err?.message ?? err);
    return e instanceof FonError ? { kind: 'FonError', name: err.name, message } : { kind: 'other error', name: err?.name ?? typeof e, message };
  }
}
