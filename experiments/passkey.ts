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
 * (`--passkey-mix` of the rows, `passkeyMixBatches`). Evaluation uses filler from the validation
 * split, at 1×, 2×, 4× and 8× the training length (`--multiples`) and depths 0.1, 0.3, 0.5, 0.7,
 * 0.9, and greedily generates 5 tokens after the question (no start token, as in training: a
 * training row starts with filler at position 0 too); a trial is right when they are the key (the
 * digits right in place are reported beside it: partial credit that moves before whole keys do on
 * small runs). Trial i draws the same key and filler start at every length and depth (sample i of
 * one stream), so the cells of a row are a paired comparison.
 *
 * What a passkey row scores (`--score`). By default (`answer`) only the 5 key digits after the
 * question are targets; the filler, needle and question are ignored by the loss (`passkeyRow`,
 * the ignore index the stack task uses), while Brown rows score every byte. Scoring every byte of
 * a passkey row (`--score all`, the first version) leaves the key 5 of the T targets of its row:
 * with half the rows passkeys at T = 256 the retrieval is ~1% of the loss, and an H200 run of that
 * (4 layers, d 256, 1200 steps of 32 × 256) learnt the digits' format but not the lookup: "71111"
 * for every key and depth, 0% at 1×. The model must still find the needle wherever it is in the
 * filler (the depth is uniform and the filler is natural text), so the task is the same; only its
 * share of the gradient changes. The Brown rows stay (default mix 0.8): they keep the model a
 * language model, so FoX's and FPA's gates learn forgetting for text and not only for this task
 * (in one CPU run of the check below, passkey rows alone reached 45% at 1× where the 0.8 mix
 * reached 100%).
 *
 * Forget-gate init (`--gate-init`). FoX's gate bias starts at 0 (f ≈ 0.5: every head forgets
 * within a few tokens at step 0, and FPA's walk "fox" starts as exactly that FoX), so at first a
 * needle tens of tokens back gets almost no gradient. `spread` (the default) sets the biases of
 * the fox arm's gates and of the fpa arm's walk (walk fox only) so that head h of H starts with a
 * memory span τ_h geometric from 2 tokens to the training length (lib/common.ts spreadGateBias,
 * withGateBias); the gates stay data-dependent and trained. `fox` keeps the zero bias. On the
 * CPU check below neither init was enough: after 2000 steps fox and fpa still answered the key's
 * marginal ("55555") at every length, where `full` answered 100% at 1×. NoPE retrieval learns
 * slower than RoPE's at this scale; read the H200 run's fox/fpa cells only if their 1× is high.
 *
 * Arms: `full` (RoPE), `fox`, `fpa` (NoPE, walk `--walk`), and `fpa-evict`: the trained FPA
 * weights decoded with the FPA layer's `evict` option (τ `--evict-tau`; attention/fpa_decode.ts),
 * whose kept fraction is GenerateResult.cacheKept averaged over layers and KV heads (1 for the
 * arms that keep every key). Byte tokenizer (vocabulary 257). Each trained arm prints its training
 * time and tokens/s (also in the table and the JSON's `trained`).
 *
 * Run (CPU defaults finish in about two minutes; they check the harness, not the claim):
 *   node --import tsx experiments/passkey.ts [--backend auto|cpu|wasm|webgpu] [--seeds 1]
 *     [--arms full,fox,fpa,fpa-evict] [--walk fox] [--steps 60] [--batch 8] [--lr 0.003]
 *     [--length 128] [--passkey-mix 0.8] [--score answer|all] [--gate-init spread|fox]
 *     [--multiples 1,2,4,8] [--depths 0.1,0.3,0.5,0.7,0.9] [--trials 1] [--layers 2] [--d-model 64]
 *     [--heads 4] [--head-dim 16] [--mlp-hidden 128] [--evict-tau 16] [--pro] [--json FILE]
 *
 * `--pro`: the fox and fpa arms with FoX's Pro extras (QK-norm, token shift of k and v, output
 * gate; specs/fpa_depth.md §1.2). A token shift lets one layer match "the key after this text"
 * directly, the lookup a passkey needs, which plain NoPE layers must build from two.
 *
 * CPU learnability check (wasm, 2 cores, 6–10 minutes an arm). `full`: 100% at 1× (0% at 2×);
 * the same with `--score all`: 0% [13% digits]; with `--passkey-mix 1`: 45% [74% digits]; fox and
 * fpa (with `--multiples 1,2,4,8`): 0% [8–13% digits] at every length; `full` at `--length 192`
 * and 1500 steps: 0% [14% digits] (longer filler needs more steps); fox and fpa with `--pro` (2000
 * steps, 2026-11-30): 0% at every length, fox [12–14% digits], fpa [9–25%], fpa-evict kept 49% at 1×
 * down to 19% at 8×:
 *   node --import tsx experiments/passkey.ts --backend wasm --arms full --steps 2000 --batch 16 \
 *     --length 96 --passkey-mix 0.8 --multiples 1,2 --trials 8 --layers 2 --d-model 64 --heads 4 \
 *     --head-dim 16 --mlp-hidden 128
 *
 * H200 runs (2026-11-30; RESULTS.md "Passkey"). At --length 256 and 1500 steps `full` trained at 29.6
 * steps/s and scored 0% at 1×. At --length 128 and 5000 steps (about 150–250 s an arm with two or
 * three processes on one H200): full 100% at 1× and 0% beyond; plain fox and fpa 0% everywhere (digits
 * at chance); fox with --pro 90% / 80% / 62% / 34% at 1× / 2× / 4× / 8× (seed 2: 100 / 66 / 26 / 16);
 * fpa with --pro seed 2 100 / 100 / 100 / 58 (eviction: the same answers, 31% … 11% of the cache
 * kept), seed 1 0% everywhere (did not learn the lookup). Start parallel arms inside one
 * `bash .gpu/enter` (two `enter`s at once collided in their set-up and one arm never ran):
 *   node --import tsx experiments/passkey.ts --backend webgpu --seeds 1 --steps 5000 --batch 32 \
 *     --length 128 --passkey-mix 0.8 --trials 10 --layers 2 --d-model 256 --heads 4 --head-dim 64 \
 *     --mlp-hidden 768 --pro --arms fpa,fpa-evict --json passkey.json
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
import { byteTokenizer, type Tokenizer } from '../src/io/tokenizer/tokenizer.ts';
import { BatchSampler, brownCorpus, buildTokenStore } from '../src/train/data/index.ts';
import { Progress } from '../src/cli/progress.ts';
import { linePlot } from '../src/io/plot_svg.ts';
import type { Batches } from '../src/train/trainer.ts';
import {
  backendFlag, commandLine, IGNORE, intFlag, markdownTable, mechanismConfig, meanStd, newModel, numberFlag, parseSeeds, parseWalk,
  spreadGateBias, trainModel, withGateBias, writeJson, writeText, type Mechanism,
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

/** A 32-bit hash of two whole numbers (murmur3 finaliser): a sample stream per (seed, purpose); experiments/spot.ts draws its own from it too. */
export function mix(a: number, b: number): number {
  let h = Math.imul(a ^ 0x27d4eb2f, 0x85ebca6b) ^ Math.imul(b + 0x165667b1, 0xc2b2ae35);
  h ^= h >>> 16; h = Math.imul(h, 0x85ebca6b); h ^= h >>> 13; h = Math.imul(h, 0xc2b2ae35); h ^= h >>> 16;
  return h >>> 0;
}

/** The shortest sample: needle, question and key with no filler. */
export const minPasskeyLength = () => NEEDLE('0'.repeat(KEY_DIGITS)).length + QUESTION.length + KEY_DIGITS;

/**
 * `n` characters of `src + ' '` repeated without end, from offset `start` (< src.length + 1): only
 * the `n` characters are copied, not the multi-megabyte filler (building the repeats and slicing
 * took ~2.7 ms a sample, half of a small model's H200 training step).
 */
export function cyclicSlice(src: string, start: number, n: number): string {
  let out = '';
  let i = start;
  while (out.length < n) {
    if (i >= src.length) { out += ' '; i = 0; continue; }
    const take = Math.min(n - out.length, src.length - i);
    out += src.slice(i, i + take);
    i += take;
  }
  return out;
}

/** Sample `index` of stream `seed`: a key in 10000 … 99999 and a filler start drawn from the stream. */
export function passkeySample(seed: number, index: number, o: PasskeyOptions): PasskeySample {
  if (!(o.depth >= 0 && o.depth <= 1)) throw new ArgumentError(`passkeySample: depth ${o.depth} must be in [0, 1]`);
  if (o.filler.length === 0) throw new ArgumentError('passkeySample: empty filler');
  const s = mix(seed, index);
  const key = String(10000 + Math.min(89999, Math.floor(uniformAt(s, 0) * 90000)));
  const needle = NEEDLE(key);
  const fillerBytes = o.length - needle.length - QUESTION.length - KEY_DIGITS;
  if (fillerBytes < 0) throw new ArgumentError(`passkeySample: length ${o.length} is shorter than the ${minPasskeyLength()} bytes of needle, question and key`);
  const fill = cyclicSlice(o.filler, Math.floor(uniformAt(s, 1) * o.filler.length), fillerBytes);
  const at = Math.round(o.depth * fillerBytes);
  const prompt = fill.slice(0, at) + needle + fill.slice(at) + QUESTION;
  return { text: prompt + key, prompt, key, needleAt: at, fillerBytes };
}

/**
 * A training row from a sample of T + 1 bytes: inputs are its first T ids, targets[t] the id after
 * inputs[t]. With `scoreAll` false only the answer is scored (the key's digits after the question;
 * every other target is IGNORE), so the loss of a passkey row is the retrieval loss alone and the
 * filler's language-model loss does not drown it; with `scoreAll` true every target is scored.
 */
export function passkeyRow(sample: PasskeySample, tok: Tokenizer, scoreAll: boolean): { inputs: Int32Array; targets: Int32Array } {
  const ids = tok.encode(sample.text);
  const T = ids.length - 1;
  const inputs = Int32Array.from(ids.slice(0, T));
  const targets = Int32Array.from(ids.slice(1));
  if (!scoreAll) targets.fill(IGNORE, 0, T - KEY_DIGITS);
  return { inputs, targets };
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

export interface PasskeyMixOptions {
  seed: number;
  /** B: rows per batch (as the language-model batches'). */
  batch: number;
  /** T: the training length (as the language-model batches'). */
  length: number;
  /** Chance that a row is a passkey sample instead of a language-model window. */
  mix: number;
  /** Score every byte of a passkey row, not only the answer (see passkeyRow). */
  scoreAll: boolean;
  filler: string;
  tok: Tokenizer;
}

/**
 * The training batches: `lm`'s windows with each row replaced, with chance `mix`, by a passkey
 * sample of T + 1 bytes at a uniform depth. Row b of batch `step` is passkey sample g = step·B + b
 * of the seed's training stream, so a batch is a pure function of the step like `lm`'s.
 */
export function passkeyMixBatches(lm: Batches, o: PasskeyMixOptions): Batches {
  const T = o.length;
  return {
    batchAt(step: number) {
      const { inputs, targets } = lm.batchAt(step);
      if (inputs.length !== o.batch * T || targets.length !== o.batch * T) {
        throw new ArgumentError(`passkeyMixBatches: the language-model batch holds ${inputs.length} inputs and ${targets.length} targets; expected ${o.batch} × ${T}`);
      }
      for (let b = 0; b < o.batch; b++) {
        const g = step * o.batch + b;
        if (uniformAt(mix(o.seed, TRAIN_STREAM), g) >= o.mix) continue;
        const sample = passkeySample(mix(o.seed, TRAIN_STREAM + 1), g, { length: T + 1, depth: uniformAt(mix(o.seed, TRAIN_STREAM + 2), g), filler: o.filler });
        const row = passkeyRow(sample, o.tok, o.scoreAll);
        inputs.set(row.inputs, b * T);
        targets.set(row.targets, b * T);
      }
      return { inputs, targets };
    },
  };
}

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
      length: { type: 'string', default: '128' }, 'passkey-mix': { type: 'string', default: '0.8' },
      multiples: { type: 'string', default: '1,2,4,8' }, depths: { type: 'string', default: '0.1,0.3,0.5,0.7,0.9' },
      trials: { type: 'string', default: '1' }, layers: { type: 'string', default: '2' }, 'd-model': { type: 'string', default: '64' },
      heads: { type: 'string', default: '4' }, 'head-dim': { type: 'string', default: '16' }, 'mlp-hidden': { type: 'string', default: '128' },
      'evict-tau': { type: 'string', default: '16' }, score: { type: 'string', default: 'answer' }, 'gate-init': { type: 'string', default: 'spread' }, json: { type: 'string' },
      pro: { type: 'boolean', default: false },
    },
  });
  const seeds = parseSeeds(f.seeds!), walk = parseWalk(f.walk!);
  const arms = f.arms!.split(',').map((a) => a.trim()).filter(Boolean) as Arm[];
  for (const a of arms) if (!ARMS.includes(a)) throw new ArgumentError(`--arms: '${a}' is not one of ${ARMS.join(', ')}`);
  if (arms.includes('fpa-evict') && !arms.includes('fpa')) throw new ArgumentError('--arms: fpa-evict decodes the trained fpa weights; list fpa too');
  const steps = intFlag('steps', f.steps), batch = intFlag('batch', f.batch), lr = numberFlag('lr', f.lr, 1e-6, 1);
  const T = intFlag('length', f.length, minPasskeyLength() + 1);
  const mixRate = numberFlag('passkey-mix', f['passkey-mix'], 0, 1);
  if (f.score !== 'answer' && f.score !== 'all') throw new ArgumentError(`--score '${f.score}': expected answer (only the key after the question) or all (every byte of a passkey row)`);
  const scoreAll = f.score === 'all';
  if (f['gate-init'] !== 'spread' && f['gate-init'] !== 'fox') throw new ArgumentError(`--gate-init '${f['gate-init']}': expected spread (forget-gate spans 2 … the training length) or fox (bias 0)`);
  const gateSpread = f['gate-init'] === 'spread';
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
  /** Per trained arm: final train loss, training wall time and tokens/s (fpa-evict reuses fpa's weights: its time is fpa's). */
  const trained: { arm: Arm; seed: number; parameters: number; trainLoss: number; trainSeconds: number; trainTokensPerSecond: number }[] = [];
  for (const seed of seeds) {
    const batches = passkeyMixBatches(new BatchSampler(store, { batch, context: T, seed }), { seed, batch, length: T, mix: mixRate, scoreAll, filler: trainFiller, tok });
    let fpaModel: Decoder | undefined;
    for (const arm of arms) {
      let model: Decoder;
      if (arm === 'fpa-evict') {
        const cfg = mechanismConfig('fpa', shape, { walk, evict: { tau: evictTau }, pro: f.pro });
        model = new Decoder(cfg, new ParamFactory({ backend, weights: Object.fromEntries(fpaModel!.namedParameters()), source: 'the trained fpa arm' }));
        const fpa = trained.find((t) => t.arm === 'fpa' && t.seed === seed)!;
        trained.push({ ...fpa, arm, parameters: model.parameterCount() });
      } else {
        model = newModel(mechanismConfig(arm as Mechanism, shape, { walk, pro: f.pro }), backend, seed);
        if (gateSpread && (arm === 'fox' || (arm === 'fpa' && walk === 'fox'))) {
          const spread = withGateBias(model, spreadGateBias(shape.nHeads, T));
          model.dispose();
          model = spread;
        }
        const run = await trainModel(model, batches, { steps, batchSize: batch, context: T, seed, lr, minLr: lr / 10, warmup: Math.ceil(steps / 20) }, `${arm} seed ${seed}`);
        trained.push({ arm, seed, parameters: model.parameterCount(), trainLoss: run.loss, trainSeconds: run.seconds, trainTokensPerSecond: run.tokensPerSecond });
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
      const t = trained.find((x) => x.arm === arm && x.seed === seed)!;
      rows.push([arm, String(seed), t.trainLoss.toFixed(3), t.trainSeconds.toFixed(1), t.trainTokensPerSecond.toFixed(0), ...multiples.map((m) => {
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
  console.log(markdownTable(['arm', 'seed', 'train loss', 'train s', 'tokens/s', ...multiples.map((m) => `${m}× (${m * T})`)], rows));
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
      settings: { steps, batch, lr, trainLength: T, passkeyMix: mixRate, score: scoreAll ? 'all' : 'answer', gateInit: gateSpread ? 'spread' : 'fox', multiples, depths, trials, evictTau, model: shape },
      trained, cells, summary,
    });
    const svg = f.json.replace(/\.json$/, '') + '.svg';
    writeText(svg, passkeyPlot(summary, T, `Passkey retrieval, ${steps} steps of ${batch} × ${T} (${backend.name}, seeds ${seeds.join(', ')})`));
    console.error(`plot: ${svg}`);
  }
}

/** Summary rows as main() builds them: mean accuracy (over depths, trials and seeds) per arm and multiple. */
export interface PasskeySummaryRow { arm: string; multiple: number; accuracy: { mean: number; std: number }; kept: { mean: number; std: number } }

/**
 * Accuracy against the evaluated length, one line per arm (SVG), for the file beside --json:
 * where each mechanism stops finding the key as the context grows past the training length T.
 */
export function passkeyPlot(summary: readonly PasskeySummaryRow[], T: number, title: string): string {
  const arms = [...new Set(summary.map((r) => r.arm))];
  const series = arms.map((arm) => ({
    name: arm === 'fpa-evict' ? `fpa-evict (cache kept ${summary.filter((r) => r.arm === arm).map((r) => `${Math.round(100 * r.kept.mean)}%`).join(', ')})` : arm,
    points: summary.filter((r) => r.arm === arm).map((r) => [r.multiple * T, 100 * r.accuracy.mean] as [number, number]),
  }));
  return linePlot({ title, xLabel: `evaluated length (tokens; trained at ${T})`, yLabel: 'passkey accuracy (%)', series, logX: true, markers: true });
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  await main();
  process.exit(0);
}
