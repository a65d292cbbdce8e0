/**
 * Experiment c (issue 5, item 5; specs/fpa_depth.md §2.3 property 3, §2.6, §2.7): passkey
 * retrieval beyond the training length, for softmax attention with RoPE, FoX, FPA, and FPA with
 * KV-cache eviction, reporting accuracy and the fraction of the cache kept.
 *
 * Data. A passkey sample is filler text (Brown Corpus text with whitespace collapsed to single
 * spaces and non-ASCII dropped, so one byte = one token) with the needle
 * " The pass key is NNNNN. Remember it." put at a chosen depth (fraction of the filler before it),
 * then " What is the pass key? The pass key is " and the 5-digit key, `length` bytes in all:
 * `passkeySample`, a pure function of (seed, index, options). Training mixes Brown windows of the
 * training length (train split) with passkey samples of the training length at random depths
 * (`--passkey-mix` of the rows). Evaluation uses filler from the validation split, at 1×, 2×, 4×
 * and 8× the training length (`--multiples`) and depths 0.1, 0.3, 0.5, 0.7, 0.9, and greedily
 * generates 5 tokens after the question; a trial is right when they are the key (the digits right
 * in place are reported beside it: partial credit that moves before whole keys do on small runs).
 * Trial i draws the same key and filler start at every length and depth (sample i of one stream),
 * so the cells of a row are a paired comparison.
 *
 * Arms: `full` (RoPE), `fox`, `fpa` (NoPE, walk `--walk`), and `fpa-evict`: the trained FPA
 * weights decoded with the FPA layer's `evict` option (τ `--evict-tau`; attention/fpa_decode.ts),
 * whose kept fraction is GenerateResult.cacheKept averaged over layers and KV heads (1 for the
 * arms that keep every key). Byte tokenizer (vocabulary 257).
 *
 * Run (CPU defaults finish in about two minutes; they check the harness, not the claim):
 *   node --import tsx experiments/passkey.ts [--backend auto|cpu|wasm|webgpu] [--seeds 1]
 *     [--arms full,fox,fpa,fpa-evict] [--walk fox] [--steps 60] [--batch 8] [--length 128]
 *     [--passkey-mix 0.5] [--multiples 1,2,4,8] [--depths 0.1,0.3,0.5,0.7,0.9] [--trials 1]
 *     [--layers 2] [--d-model 64] [--heads 4] [--head-dim 16] [--mlp-hidden 128] [--evict-tau 16]
 *     [--json FILE]
 *
 * H200 run (the settings RESULTS.md will quote):
 *   node --import tsx experiments/passkey.ts --backend webgpu --seeds 1,2,3 --steps 4000 --batch 32 \
 *     --length 512 --passkey-mix 0.3 --trials 20 --layers 6 --d-model 384 --heads 6 --head-dim 64 \
 *     --mlp-hidden 1024 --json passkey.json
 *
 * Target (spec §2.7 [B]): FPA 100% at 8× the training length, and with eviction on still 100% with
 * ≤ 30% of the KV cache kept (the abstract reports ~25%); FoX degrades beyond its forgetting window
 * and RoPE attention beyond the training length.
 */
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { ArgumentError } from '../src/errors.ts';
import { uniformAt } from '../src/ops/random.ts';
import { Decoder } from '../src/model/decoder.ts';
import { ParamFactory } from '../src/nn/params.ts';
import { generate } from '../src/infer/generate.ts';
import { byteTokenizer } from '../src/io/tokenizer/tokenizer.ts';
import { BatchSampler, brownCorpus, buildTokenStore } from '../src/train/data/index.ts';
import { Progress } from '../src/cli/progress.ts';
import {
  backendFlag, commandLine, intFlag, markdownTable, mechanismConfig, meanStd, newModel, numberFlag, parseSeeds, parseWalk,
  trainModel, writeJson, type Mechanism,
} from './lib/common.ts';

export const NEEDLE = (key: string) => ` The pass key is ${key}. Remember it.`;
export const QUESTION = ' What is the pass key? The pass key is ';
export const KEY_DIGITS = 5;

export interface PasskeyOptions {
  /** Bytes in the whole sample, answer included. */
  length: number;
  /** Where the needle starts, as a fraction of the filler before it (0 … 1). */
  depth: number;
  /** Filler source (ASCII, see `asciiFiller`); read cyclically from a seeded start. */
  filler: string;
}

export interface PasskeySample {
  /** The whole sample: prompt + key (`length` bytes). */
  text: string;
  /** Everything before the key. */
  prompt: string;
  key: string;
  /** Byte offset of the needle in `text`. */
  needleAt: number;
  /** Bytes of filler (around the needle). */
  fillerBytes: number;
}

/** Whitespace collapsed to single spaces and anything outside printable ASCII dropped: one byte per character. */
export function asciiFiller(texts: readonly string[]): string {
  return texts.join(' ').replace(/[^\x20-\x7e\s]/g, '').replace(/\s+/g, ' ').trim();
}

function mix(a: number, b: number): number {
  let h = Math.imul(a ^ 0x27d4eb2f, 0x85ebca6b) ^ Math.imul(b + 0x165667b1, 0xc2b2ae35);
  h ^= h >>> 16; h = Math.imul(h, 0x85ebca6b); h ^= h >>> 13; h = Math.imul(h, 0xc2b2ae35); h ^= h >>> 16;
  return h >>> 0;
}

/** The shortest sample: needle, question and key with no filler. */
export const minPasskeyLength = () => NEEDLE('0'.repeat(KEY_DIGITS)).length + QUESTION.length + KEY_DIGITS;

/** Sample `index` of stream `seed`: a key in 10000 … 99999 and a filler start drawn from the stream. */
export function passkeySample(seed: number, index: number, o: PasskeyOptions): PasskeySample {
  if (!(o.depth >= 0 && o.depth <= 1)) throw new ArgumentError(`passkeySample: depth ${o.depth} must be in [0, 1]`);
  if (o.filler.length === 0) throw new ArgumentError('passkeySample: empty filler');
  const s = mix(seed, index);
  const key = String(10000 + Math.min(89999, Math.floor(uniformAt(s, 0) * 90000)));
  const needle = NEEDLE(key);
  const fillerBytes = o.length - needle.length - QUESTION.length - KEY_DIGITS;
  if (fillerBytes < 0) throw new ArgumentError(`passkeySample: length ${o.length} is shorter than the ${minPasskeyLength()} bytes of needle, question and key`);
  const start = Math.floor(uniformAt(s, 1) * o.filler.length);
  let fill = '';
  while (fill.length < fillerBytes + start) fill += o.filler + ' ';
  fill = fill.slice(start, start + fillerBytes);
  const at = Math.round(o.depth * fillerBytes);
  const prompt = fill.slice(0, at) + needle + fill.slice(at) + QUESTION;
  return { text: prompt + key, prompt, key, needleAt: at, fillerBytes };
}

/** Fraction of the key's digits that `text` has at the same place. */
export function digitsRight(text: string, key: string): number {
  let n = 0;
  for (let i = 0; i < key.length; i++) if (text[i] === key[i]) n++;
  return n / key.length;
}

const ARMS = ['full', 'fox', 'fpa', 'fpa-evict'] as const;
type Arm = (typeof ARMS)[number];
const TRAIN_STREAM = 0x9a55, EVAL_STREAM = 0xe9a1;

function parseList(name: string, s: string, each: (x: string) => number): number[] {
  const xs = s.split(',').map((x) => x.trim()).filter(Boolean).map(each);
  if (xs.length === 0) throw new ArgumentError(`--${name}: empty list`);
  return xs;
}

async function main(): Promise<void> {
  const { values: f } = parseArgs({
    options: {
      backend: { type: 'string', default: 'auto' }, seeds: { type: 'string', default: '1' },
      arms: { type: 'string', default: 'full,fox,fpa,fpa-evict' }, walk: { type: 'string', default: 'fox' },
      steps: { type: 'string', default: '60' }, batch: { type: 'string', default: '8' }, lr: { type: 'string', default: '0.003' },
      length: { type: 'string', default: '128' }, 'passkey-mix': { type: 'string', default: '0.5' },
      multiples: { type: 'string', default: '1,2,4,8' }, depths: { type: 'string', default: '0.1,0.3,0.5,0.7,0.9' },
      trials: { type: 'string', default: '1' }, layers: { type: 'string', default: '2' }, 'd-model': { type: 'string', default: '64' },
      heads: { type: 'string', default: '4' }, 'head-dim': { type: 'string', default: '16' }, 'mlp-hidden': { type: 'string', default: '128' },
      'evict-tau': { type: 'string', default: '16' }, json: { type: 'string' },
    },
  });
  const seeds = parseSeeds(f.seeds!), walk = parseWalk(f.walk!);
  const arms = f.arms!.split(',').map((a) => a.trim()).filter(Boolean) as Arm[];
  for (const a of arms) if (!ARMS.includes(a)) throw new ArgumentError(`--arms: '${a}' is not one of ${ARMS.join(', ')}`);
  if (arms.includes('fpa-evict') && !arms.includes('fpa')) throw new ArgumentError('--arms: fpa-evict decodes the trained fpa weights; list fpa too');
  const steps = intFlag('steps', f.steps), batch = intFlag('batch', f.batch), lr = numberFlag('lr', f.lr, 1e-6, 1);
  const T = intFlag('length', f.length, minPasskeyLength() + 1);
  const mixRate = numberFlag('passkey-mix', f['passkey-mix'], 0, 1);
  const multiples = parseList('multiples', f.multiples!, (x) => intFlag('multiples', x));
  const depths = parseList('depths', f.depths!, (x) => numberFlag('depths', x, 0, 1));
  const trials = intFlag('trials', f.trials), evictTau = numberFlag('evict-tau', f['evict-tau'], 1e-6, 1e6);
  const tok = byteTokenizer();
  const shape = {
    vocabSize: tok.vocabSize, dModel: intFlag('d-model', f['d-model']), nLayers: intFlag('layers', f.layers), nHeads: intFlag('heads', f.heads),
    headDim: intFlag('head-dim', f['head-dim']), mlpHidden: intFlag('mlp-hidden', f['mlp-hidden']),
    contextLength: Math.max(...multiples) * T + 1,
  };
  const backend = await backendFlag(f.backend!);
  console.error(`passkey on ${backend.name}: ${arms.join(', ')} × seeds ${seeds.join(', ')}, ${steps} steps of ${batch} × ${T}, eval at ${multiples.map((m) => `${m}×`).join(' ')}`);

  const corpus = brownCorpus();
  const trainFiller = asciiFiller(corpus.train), evalFiller = asciiFiller(corpus.validation);
  const store = await buildTokenStore([trainFiller], tok);

  /** accuracy: whole key right; digits: fraction of key digits right in place (partial credit for small runs); kept: cache fraction; example: the first trial's key and output. */
  interface Cell { arm: Arm; seed: number; multiple: number; length: number; depth: number; accuracy: number; digits: number; kept: number; example: { key: string; generated: string } }
  const cells: Cell[] = [];
  const trained: { arm: Arm; seed: number; parameters: number; trainLoss: number }[] = [];
  for (const seed of seeds) {
    const sampler = new BatchSampler(store, { batch, context: T, seed });
    const batches = {
      batchAt(step: number) {
        const { inputs, targets } = sampler.batchAt(step);
        for (let b = 0; b < batch; b++) {
          if (uniformAt(mix(seed, TRAIN_STREAM), step * batch + b) >= mixRate) continue;
          const g = step * batch + b;
          const sample = passkeySample(mix(seed, TRAIN_STREAM + 1), g, { length: T + 1, depth: uniformAt(mix(seed, TRAIN_STREAM + 2), g), filler: trainFiller });
          const ids = tok.encode(sample.text);
          inputs.set(ids.slice(0, T), b * T);
          targets.set(ids.slice(1), b * T);
        }
        return { inputs, targets };
      },
    };
    let fpaModel: Decoder | undefined;
    for (const arm of arms) {
      let model: Decoder;
      if (arm === 'fpa-evict') {
        const cfg = mechanismConfig('fpa', shape, { walk, evict: { tau: evictTau } });
        model = new Decoder(cfg, new ParamFactory({ backend, weights: Object.fromEntries(fpaModel!.namedParameters()), source: 'the trained fpa arm' }));
        trained.push({ arm, seed, parameters: model.parameterCount(), trainLoss: trained.find((t) => t.arm === 'fpa' && t.seed === seed)!.trainLoss });
      } else {
        model = newModel(mechanismConfig(arm as Mechanism, shape, { walk }), backend, seed);
        const trainLoss = await trainModel(model, batches, { steps, batchSize: batch, context: T, seed, lr, minLr: lr / 10, warmup: Math.ceil(steps / 20) }, `${arm} seed ${seed}`);
        trained.push({ arm, seed, parameters: model.parameterCount(), trainLoss });
      }
      const bar = new Progress({ label: `passkey ${arm} seed ${seed}`, total: multiples.length * depths.length * trials, unit: 'trial' });
      for (const m of multiples) {
        for (const depth of depths) {
          let right = 0, digits = 0, kept = 0;
          let example = { key: '', generated: '' };
          for (let i = 0; i < trials; i++) {
            const sample = passkeySample(mix(seed, EVAL_STREAM), i, { length: m * T, depth, filler: evalFiller });
            const r = await generate(model, tok, sample.prompt, { maxTokens: KEY_DIGITS, temperature: 0, startIds: [] });
            if (r.text === sample.key) right++;
            digits += digitsRight(r.text, sample.key);
            if (i === 0) example = { key: sample.key, generated: r.text };
            const heads = r.cacheKept.flat();
            kept += heads.length ? heads.reduce((a, b) => a + b, 0) / heads.length : 1;
            bar.tick();
          }
          cells.push({ arm, seed, multiple: m, length: m * T, depth, accuracy: right / trials, digits: digits / trials, kept: kept / trials, example });
        }
      }
      bar.finish();
      if (arm === 'fpa') fpaModel = model;
      else model.dispose();
    }
    fpaModel?.dispose();
  }
  store.close();

  // Table: one row per (arm, seed), one column per multiple (accuracy over depths and trials, and kept fraction).
  const pct = (x: number) => `${(100 * x).toFixed(0)}%`;
  const rows: string[][] = [];
  const summary: { arm: Arm; multiple: number; accuracy: { mean: number; std: number }; kept: { mean: number; std: number } }[] = [];
  for (const arm of arms) {
    for (const seed of seeds) {
      rows.push([arm, String(seed), ...multiples.map((m) => {
        const cs = cells.filter((c) => c.arm === arm && c.seed === seed && c.multiple === m);
        const acc = meanStd(cs.map((c) => c.accuracy)).mean, dig = meanStd(cs.map((c) => c.digits)).mean, kept = meanStd(cs.map((c) => c.kept)).mean;
        return `${pct(acc)} [${pct(dig)} digits]${arm === 'fpa-evict' ? ` (kept ${pct(kept)})` : ''}`;
      })]);
    }
    for (const m of multiples) {
      const per = seeds.map((seed) => cells.filter((c) => c.arm === arm && c.seed === seed && c.multiple === m));
      summary.push({ arm, multiple: m, accuracy: meanStd(per.map((cs) => meanStd(cs.map((c) => c.accuracy)).mean)), kept: meanStd(per.map((cs) => meanStd(cs.map((c) => c.kept)).mean)) });
    }
  }
  console.log(`\nPasskey retrieval: accuracy over depths ${depths.join(', ')} × ${trials} trial(s) [digits right in place]; trained at ${T} bytes; fpa-evict τ = ${evictTau}, kept = fraction of the KV cache kept at the end\n`);
  console.log(markdownTable(['arm', 'seed', ...multiples.map((m) => `${m}× (${m * T})`)], rows));
  const byDepth: string[][] = [];
  for (const arm of arms) {
    for (const depth of depths) {
      byDepth.push([arm, depth.toFixed(2), ...multiples.map((m) => {
        const cs = cells.filter((c) => c.arm === arm && c.depth === depth && c.multiple === m);
        return pct(meanStd(cs.map((c) => c.accuracy)).mean);
      })]);
    }
  }
  console.log(`\nBy depth (mean over seeds ${seeds.join(', ')})\n`);
  console.log(markdownTable(['arm', 'depth', ...multiples.map((m) => `${m}× (${m * T})`)], byDepth));
  if (f.json) {
    writeJson(f.json, {
      experiment: 'passkey', command: commandLine(), backend: backend.name, seeds, arms, walk,
      settings: { steps, batch, lr, trainLength: T, passkeyMix: mixRate, multiples, depths, trials, evictTau, model: shape },
      trained, cells, summary,
    });
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  await main();
  process.exit(0);
}
