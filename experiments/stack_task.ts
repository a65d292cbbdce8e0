/**
 * Experiment a (issue 5, item 5; specs/fpa_depth.md §2.3 property 4 and §2.7): a synthetic stack
 * task that one-layer models learn with FPA, FoX and softmax attention (RoPE), accuracy per seed.
 *
 * The task — labelled bracket matching, i.e. nested-scope lookup. A sequence is a stream of
 * tokens: `(k` opens a scope labelled k (one of K labels), `)` closes the innermost open scope,
 * `.` is filler, and `?` asks for the label of the innermost scope still open; the token after
 * `?` is the answer `=k`. Only the answer is scored (the other targets are ignored by the loss),
 * so a model must keep the open scopes as a stack: after `(1 (2 (3 ) )` the answer is `=1`, not
 * the most recent `(3`. The "last open label" heuristic is reported beside the models as the
 * baseline that ignores closes. FPA's shared walk can hold this stack exactly (the walk rises on
 * `(`, falls on `)`, and a key dies when the walk drops below its level), FoX can only forget by
 * distance, and softmax attention must find the top from content and position.
 *
 * Data is a pure function of (seed, index): `stackSequence`. Held-out sequences come from another
 * stream than the training ones; the "deeper" set nests up to `--eval-depth` (deeper than the
 * `--depth` seen in training) in sequences of `--eval-length`.
 *
 * Run (CPU defaults finish in a minute or two):
 *   node --import tsx experiments/stack_task.ts [--backend auto|cpu|wasm|webgpu] [--seeds 1,2,3]
 *     [--mechanisms full,fox,fpa] [--walk tanh] [--steps 120] [--batch 16] [--length 64] [--depth 4]
 *     [--eval-length 128] [--eval-depth 8] [--labels 4] [--d-model 64] [--heads 4] [--head-dim 16]
 *     [--mlp-hidden 128] [--eval-seqs 64] [--json FILE]
 *
 * H200 run (the settings RESULTS.md will quote):
 *   node --import tsx experiments/stack_task.ts --backend webgpu --seeds 1,2,3,4,5 --steps 3000 \
 *     --batch 64 --length 256 --depth 8 --eval-length 512 --eval-depth 16 --labels 8 \
 *     --d-model 128 --heads 4 --head-dim 32 --mlp-hidden 256 --eval-seqs 512 --json stack_task.json
 *
 * Target (spec §2.3 property 4, a proposal [P]): FPA (shared-walk regime, walk "tanh" so the walk
 * can rise and fall) near 100% on held-out and deeper nesting; FoX and RoPE attention below it
 * on the deeper set. Prints a markdown table; --json writes every seed's figures.
 */
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { tensor } from '../src/ops/creation.ts';
import { uniformAt } from '../src/ops/random.ts';
import { noGrad } from '../src/tensor/scope.ts';
import type { Decoder } from '../src/model/decoder.ts';
import { Progress } from '../src/cli/progress.ts';
import {
  backendFlag, commandLine, IGNORE, intFlag, markdownTable, mechanismConfig, meanStd, newModel, numberFlag, parseMechanisms, parseSeeds,
  parseWalk, trainModel, writeJson, type Mechanism,
} from './lib/common.ts';

/** Token ids of the task; labels 0 … K−1 open as FIRST_OPEN + k and answer as FIRST_OPEN + K + k. */
export const STACK_TOKENS = { close: 0, filler: 1, query: 2, firstOpen: 3 } as const;
/** Target of a position that is not scored (shared with the passkey rows). */
export { IGNORE };

export interface StackTaskOptions {
  /** Tokens per sequence. */
  length: number;
  /** K: scope labels. */
  labels: number;
  /** Most scopes open at once. */
  maxDepth: number;
  /** Chance that a position (with a scope open) starts a `? =k` query. */
  queryRate: number;
}

export interface StackSequence {
  /** Token ids (length). */
  inputs: Int32Array;
  /** targets[t] is the answer id where inputs[t] is `?`, else IGNORE. */
  targets: Int32Array;
  /** The deepest nesting reached. */
  depthReached: number;
}

export const stackVocabSize = (labels: number) => STACK_TOKENS.firstOpen + 2 * labels;
export const openId = (label: number) => STACK_TOKENS.firstOpen + label;
export const answerId = (label: number, labels: number) => STACK_TOKENS.firstOpen + labels + label;

/** A 32-bit hash of two whole numbers (murmur3 finaliser), to give each sequence its own stream. */
function mix(a: number, b: number): number {
  let h = Math.imul(a ^ 0x9e3779b9, 0x85ebca6b) ^ Math.imul(b + 0x632be5ab, 0xc2b2ae35);
  h ^= h >>> 16; h = Math.imul(h, 0x85ebca6b); h ^= h >>> 13; h = Math.imul(h, 0xc2b2ae35); h ^= h >>> 16;
  return h >>> 0;
}

/**
 * Sequence `index` of stream `seed`: a random walk over open / close / filler (open and close
 * equally likely, open forced at depth 0, never past maxDepth) with `? =k` queries while a scope is
 * open, where k is the label on top of the stack; a sequence without a query by its last two
 * positions asks there when a scope is open.
 */
export function stackSequence(seed: number, index: number, o: StackTaskOptions): StackSequence {
  const s = mix(seed, index);
  let c = 0;
  const u = () => uniformAt(s, c++);
  const inputs = new Int32Array(o.length), targets = new Int32Array(o.length).fill(IGNORE);
  const stack: number[] = [];
  let depthReached = 0, queries = 0;
  for (let t = 0; t < o.length; t++) {
    // The last chance for a query takes it, so that every sequence has something to score (a
    // training batch with no scored target would have a mean loss of 0 / 0).
    const lastChance = queries === 0 && t === o.length - 2;
    if (stack.length > 0 && t + 1 < o.length && (u() < o.queryRate || lastChance)) {
      queries++;
      const top = stack[stack.length - 1];
      inputs[t] = STACK_TOKENS.query;
      targets[t] = answerId(top, o.labels);
      inputs[++t] = answerId(top, o.labels);
      continue;
    }
    const r = u();
    if (stack.length === 0 || (stack.length < o.maxDepth && r < 0.4)) {
      const label = Math.min(o.labels - 1, Math.floor(u() * o.labels));
      stack.push(label);
      depthReached = Math.max(depthReached, stack.length);
      inputs[t] = openId(label);
    } else if (r < 0.8) {
      stack.pop();
      inputs[t] = STACK_TOKENS.close;
    } else {
      inputs[t] = STACK_TOKENS.filler;
    }
  }
  return { inputs, targets, depthReached };
}

/** The baseline that ignores closes: answer with the label of the most recent `(k`. */
export function lastOpenAccuracy(seqs: readonly StackSequence[], labels: number): number {
  let right = 0, total = 0;
  for (const q of seqs) {
    let last = -1;
    for (let t = 0; t < q.inputs.length; t++) {
      const id = q.inputs[t];
      if (id >= STACK_TOKENS.firstOpen && id < STACK_TOKENS.firstOpen + labels) last = id - STACK_TOKENS.firstOpen;
      if (q.targets[t] !== IGNORE) { total++; if (last >= 0 && answerId(last, labels) === q.targets[t]) right++; }
    }
  }
  return total ? right / total : NaN;
}

/** Fraction of scored positions whose argmax is the answer, over `seqs` (all of one length). */
export async function answerAccuracy(model: Decoder, seqs: readonly StackSequence[], batch: number): Promise<number> {
  const backend = model.embed.weight.backend;
  const V = model.config.vocabSize;
  let right = 0, total = 0;
  for (let i = 0; i < seqs.length; i += batch) {
    const group = seqs.slice(i, i + batch);
    const T = group[0].inputs.length;
    const ids = new Int32Array(group.length * T);
    group.forEach((q, b) => ids.set(q.inputs, b * T));
    const logits = noGrad(() => {
      const x = tensor(ids, [group.length, T], { backend, dtype: 'i32' });
      const y = model.forward(x); // (B, T, V)
      x.dispose();
      return y;
    });
    const host = await logits.data();
    logits.dispose();
    group.forEach((q, b) => {
      for (let t = 0; t < T; t++) {
        if (q.targets[t] === IGNORE) continue;
        const row = (b * T + t) * V;
        let best = 0;
        for (let v = 1; v < V; v++) if (host[row + v] > host[row + best]) best = v;
        total++;
        if (best === q.targets[t]) right++;
      }
    });
  }
  return total ? right / total : NaN;
}

/** Training streams and held-out streams never share a seed. */
const TRAIN_STREAM = 0x7a1, HELD_OUT_STREAM = 0xe7a1, DEEPER_STREAM = 0xdee9;

async function main(): Promise<void> {
  const { values: f } = parseArgs({
    options: {
      backend: { type: 'string', default: 'auto' }, seeds: { type: 'string', default: '1,2,3' },
      mechanisms: { type: 'string', default: 'full,fox,fpa' }, walk: { type: 'string', default: 'tanh' },
      steps: { type: 'string', default: '120' }, batch: { type: 'string', default: '16' }, lr: { type: 'string', default: '0.003' },
      length: { type: 'string', default: '64' }, depth: { type: 'string', default: '4' },
      'eval-length': { type: 'string', default: '128' }, 'eval-depth': { type: 'string', default: '8' },
      labels: { type: 'string', default: '4' }, 'query-rate': { type: 'string', default: '0.15' },
      'd-model': { type: 'string', default: '64' }, heads: { type: 'string', default: '4' }, 'head-dim': { type: 'string', default: '16' },
      'mlp-hidden': { type: 'string', default: '128' }, 'eval-seqs': { type: 'string', default: '64' }, json: { type: 'string' },
    },
  });
  const seeds = parseSeeds(f.seeds!), mechanisms = parseMechanisms(f.mechanisms!), walk = parseWalk(f.walk!);
  const steps = intFlag('steps', f.steps), batch = intFlag('batch', f.batch), lr = numberFlag('lr', f.lr, 1e-6, 1);
  const labels = intFlag('labels', f.labels), queryRate = numberFlag('query-rate', f['query-rate'], 0.01, 0.5);
  const train: StackTaskOptions = { length: intFlag('length', f.length, 4), labels, maxDepth: intFlag('depth', f.depth), queryRate };
  const deeper: StackTaskOptions = { length: intFlag('eval-length', f['eval-length'], 4), labels, maxDepth: intFlag('eval-depth', f['eval-depth']), queryRate };
  const evalSeqs = intFlag('eval-seqs', f['eval-seqs']);
  const shape = {
    vocabSize: stackVocabSize(labels), dModel: intFlag('d-model', f['d-model']), nLayers: 1, nHeads: intFlag('heads', f.heads),
    headDim: intFlag('head-dim', f['head-dim']), mlpHidden: intFlag('mlp-hidden', f['mlp-hidden']),
    contextLength: Math.max(train.length, deeper.length),
  };
  const backend = await backendFlag(f.backend!);
  console.error(`stack task on ${backend.name}: ${mechanisms.join(', ')} × seeds ${seeds.join(', ')}, ${steps} steps of ${batch} × ${train.length}`);

  const results: { mechanism: Mechanism; seed: number; parameters: number; trainLoss: number; trainSeconds: number; trainTokensPerSecond: number; heldOut: number; deeper: number }[] = [];
  const baselines: { seed: number; heldOut: number; deeper: number }[] = [];
  for (const seed of seeds) {
    const heldOutSet = Array.from({ length: evalSeqs }, (_, i) => stackSequence(mix(seed, HELD_OUT_STREAM), i, train));
    const deeperSet = Array.from({ length: evalSeqs }, (_, i) => stackSequence(mix(seed, DEEPER_STREAM), i, deeper));
    baselines.push({ seed, heldOut: lastOpenAccuracy(heldOutSet, labels), deeper: lastOpenAccuracy(deeperSet, labels) });
    const batches = {
      batchAt(step: number) {
        const inputs = new Int32Array(batch * train.length), targets = new Int32Array(batch * train.length);
        for (let b = 0; b < batch; b++) {
          const q = stackSequence(mix(seed, TRAIN_STREAM), step * batch + b, train);
          inputs.set(q.inputs, b * train.length);
          targets.set(q.targets, b * train.length);
        }
        return { inputs, targets };
      },
    };
    for (const m of mechanisms) {
      const model = newModel(mechanismConfig(m, shape, { walk }), backend, seed);
      try {
        const run = await trainModel(model, batches, { steps, batchSize: batch, context: train.length, seed, lr, minLr: lr / 10, warmup: Math.ceil(steps / 20) }, `${m} seed ${seed}`);
        const bar = new Progress({ label: `eval ${m} seed ${seed}`, total: 2, unit: 'set' });
        const heldOut = await answerAccuracy(model, heldOutSet, batch);
        bar.tick();
        const deep = await answerAccuracy(model, deeperSet, Math.max(1, Math.floor(batch / 2)));
        bar.tick();
        bar.finish();
        results.push({ mechanism: m, seed, parameters: model.parameterCount(), trainLoss: run.loss, trainSeconds: run.seconds, trainTokensPerSecond: run.tokensPerSecond, heldOut, deeper: deep });
      } finally {
        model.dispose();
      }
    }
  }

  const pct = (x: number) => `${(100 * x).toFixed(1)}%`;
  const rows = results.map((r) => [r.mechanism, String(r.seed), String(r.parameters), r.trainLoss.toFixed(3), pct(r.heldOut), pct(r.deeper)]);
  const summary = [...mechanisms.map((m) => {
    const rs = results.filter((r) => r.mechanism === m);
    return { mechanism: m as string, heldOut: meanStd(rs.map((r) => r.heldOut)), deeper: meanStd(rs.map((r) => r.deeper)) };
  }), { mechanism: 'last-open baseline', heldOut: meanStd(baselines.map((b) => b.heldOut)), deeper: meanStd(baselines.map((b) => b.deeper)) }];
  for (const s of summary) rows.push([`${s.mechanism} (mean ± sd)`, seeds.join(','), '', '', `${pct(s.heldOut.mean)} ± ${pct(s.heldOut.std)}`, `${pct(s.deeper.mean)} ± ${pct(s.deeper.std)}`]);
  console.log(`\nStack task (labelled bracket matching), one layer, walk ${walk}: answer accuracy; train depth ≤ ${train.maxDepth} at length ${train.length}, deeper set depth ≤ ${deeper.maxDepth} at length ${deeper.length}\n`);
  console.log(markdownTable(['mechanism', 'seed', 'params', 'train loss', `held-out (depth ≤ ${train.maxDepth})`, `deeper (depth ≤ ${deeper.maxDepth})`], rows));
  if (f.json) {
    writeJson(f.json, {
      experiment: 'stack_task', command: commandLine(), backend: backend.name, seeds, mechanisms, walk,
      settings: { steps, batch, lr, train, deeper, evalSeqs, model: shape }, results, baselines, summary,
    });
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  await main();
  process.exit(0);
}
