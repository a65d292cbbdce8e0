/**
 * The experiment harness (experiments/*.ts): the data generators are pure functions of their seed
 * and say what they claim (the stack task's answer is the innermost open scope; a passkey sample
 * has the key at the requested depth and the requested length), and each script runs end to end
 * with tiny settings on the cpu backend and writes the JSON it documents.
 */
import { strict as assert } from 'node:assert';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { ArgumentError } from '../../src/errors.ts';
import { byteTokenizer } from '../../src/io/tokenizer/tokenizer.ts';
import {
  answerId, IGNORE, lastOpenAccuracy, openId, STACK_TOKENS, stackSequence, stackVocabSize, type StackSequence, type StackTaskOptions,
} from '../../experiments/stack_task.ts';
import { asciiFiller, cyclicSlice, digitsRight, KEY_DIGITS, minPasskeyLength, NEEDLE, passkeyMixBatches, passkeyRow, passkeySample, QUESTION } from '../../experiments/passkey.ts';
import {
  backendFlag, formatTrainRun, markdownTable, mechanismConfig, meanStd, newModel, parseMechanisms, parseSeeds, spreadGateBias, withGateBias,
} from '../../experiments/lib/common.ts';

const STACK: StackTaskOptions = { length: 200, labels: 5, maxDepth: 6, queryRate: 0.15 };

/** Replays a sequence with an explicit stack and checks every token against the grammar. */
function replay(q: StackSequence, o: StackTaskOptions): { queries: number; popsBeforeQuery: number } {
  const stack: number[] = [];
  let queries = 0, popsBeforeQuery = 0, poppedSinceOpen = false;
  for (let t = 0; t < q.inputs.length; t++) {
    const id = q.inputs[t];
    if (id === STACK_TOKENS.query) {
      assert.ok(stack.length > 0, `query at ${t} with no scope open`);
      const want = answerId(stack[stack.length - 1], o.labels);
      assert.equal(q.targets[t], want, `answer at ${t}`);
      if (t + 1 < q.inputs.length) assert.equal(q.inputs[t + 1], want, `answer token after the query at ${t}`);
      queries++;
      if (poppedSinceOpen) popsBeforeQuery++;
      continue;
    }
    assert.equal(q.targets[t], IGNORE, `only queries are scored (position ${t})`);
    if (id === STACK_TOKENS.close) {
      assert.ok(stack.length > 0, `close at ${t} with no scope open`);
      stack.pop();
      poppedSinceOpen = true;
    } else if (id >= openId(0) && id < openId(o.labels)) {
      stack.push(id - openId(0));
      assert.ok(stack.length <= o.maxDepth, `depth ${stack.length} > ${o.maxDepth} at ${t}`);
      poppedSinceOpen = false;
    } else if (id !== STACK_TOKENS.filler) {
      assert.ok(id >= answerId(0, o.labels) && id < stackVocabSize(o.labels) && q.inputs[t - 1] === STACK_TOKENS.query, `token ${id} at ${t}`);
    }
  }
  return { queries, popsBeforeQuery };
}

describe('stack task generator', () => {
  it('is a pure function of (seed, index)', () => {
    const a = stackSequence(7, 3, STACK), b = stackSequence(7, 3, STACK);
    assert.deepEqual(a.inputs, b.inputs);
    assert.deepEqual(a.targets, b.targets);
    assert.notDeepEqual(stackSequence(7, 4, STACK).inputs, a.inputs);
    assert.notDeepEqual(stackSequence(8, 3, STACK).inputs, a.inputs);
  });

  it("scores each query with the innermost open scope's label and keeps to the grammar", () => {
    let queries = 0, popped = 0, deepest = 0;
    for (let i = 0; i < 50; i++) {
      const q = stackSequence(1, i, STACK);
      assert.equal(q.inputs.length, STACK.length);
      const r = replay(q, STACK);
      queries += r.queries;
      popped += r.popsBeforeQuery;
      deepest = Math.max(deepest, q.depthReached);
    }
    assert.ok(queries > 500, `${queries} queries in 50 sequences`);
    // Queries after a close are the ones a "most recent open" shortcut can get wrong.
    assert.ok(popped > queries / 5, `${popped} of ${queries} queries come after a close`);
    assert.equal(deepest, STACK.maxDepth);
  });

  it('a sequence asks at its last chance when it has not asked yet', () => {
    const rare = { ...STACK, length: 12, queryRate: 0.01 };
    let asked = 0;
    for (let i = 0; i < 100; i++) {
      const q = stackSequence(2, i, rare);
      if (replay(q, rare).queries > 0) asked++;
    }
    // Without the last chance about 1 − 0.99^10 ≈ 10% would ask; only an empty stack at position 10 prevents it.
    assert.ok(asked >= 80, `${asked} of 100 short sequences have a query`);
  });

  it('the last-open baseline is wrong exactly where a close hid the most recent scope', () => {
    const o = { ...STACK, labels: 3 };
    const seq = (ids: number[], targets: number[]): StackSequence => ({ inputs: Int32Array.from(ids), targets: Int32Array.from(targets), depthReached: 2 });
    // (0 (1 ) ? =0 : the answer is 0, the baseline says 1.
    const hidden = seq([openId(0), openId(1), STACK_TOKENS.close, STACK_TOKENS.query, answerId(0, 3)], [IGNORE, IGNORE, IGNORE, answerId(0, 3), IGNORE]);
    replay(hidden, o);
    assert.equal(lastOpenAccuracy([hidden], 3), 0);
    // (0 (1 ? =1 : both agree.
    const open = seq([openId(0), openId(1), STACK_TOKENS.query, answerId(1, 3)], [IGNORE, IGNORE, answerId(1, 3), IGNORE]);
    replay(open, o);
    assert.equal(lastOpenAccuracy([open], 3), 1);
    assert.equal(lastOpenAccuracy([hidden, open], 3), 0.5);
  });
});

describe('passkey generator', () => {
  const filler = asciiFiller(['The quick brown fox\tjumps over the lazy dog. ', 'Caf\u00e9 au lait,\n\nplease.']);

  it('asciiFiller keeps one byte per character with single spaces', () => {
    assert.equal(filler, 'The quick brown fox jumps over the lazy dog. Caf au lait, please.');
  });

  it('puts the key at the requested depth in a sample of the requested length', () => {
    const tok = byteTokenizer();
    for (const length of [minPasskeyLength(), 150, 700]) {
      for (const depth of [0, 0.1, 0.5, 0.9, 1]) {
        const s = passkeySample(3, 11, { length, depth, filler });
        assert.equal(s.text.length, length);
        assert.equal(tok.encode(s.text).length, length, 'one token per byte');
        assert.match(s.key, /^[1-9]\d{4}$/);
        assert.equal(s.key.length, KEY_DIGITS);
        assert.equal(s.prompt + s.key, s.text);
        assert.ok(s.prompt.endsWith(QUESTION));
        assert.equal(s.fillerBytes, length - NEEDLE(s.key).length - QUESTION.length - KEY_DIGITS);
        assert.equal(s.needleAt, Math.round(depth * s.fillerBytes));
        assert.equal(s.text.slice(s.needleAt, s.needleAt + NEEDLE(s.key).length), NEEDLE(s.key));
        assert.equal(s.text.indexOf(s.key), s.needleAt + ' The pass key is '.length, 'the key appears first in the needle');
      }
    }
  });

  it('cyclicSlice reads the filler and a space repeated without end, from any offset', () => {
    const src = 'abcdef';
    const cycle = (src + ' ').repeat(10);
    for (const start of [0, 3, 5, 6]) {
      for (const n of [0, 1, 4, 7, 15, 30]) assert.equal(cyclicSlice(src, start, n), cycle.slice(start, start + n), `start ${start}, n ${n}`);
    }
  });

  it('is a pure function of (seed, index) and varies the key', () => {
    const o = { length: 300, depth: 0.5, filler };
    assert.deepEqual(passkeySample(5, 2, o), passkeySample(5, 2, o));
    const keys = new Set(Array.from({ length: 20 }, (_, i) => passkeySample(5, i, o).key));
    assert.ok(keys.size >= 18, `${keys.size} distinct keys in 20 samples`);
  });

  it('a training row scores only the answer, at the positions generate() predicts it from', () => {
    const tok = byteTokenizer();
    const T = 120;
    const s = passkeySample(4, 9, { length: T + 1, depth: 0.3, filler });
    const row = passkeyRow(s, tok, false);
    assert.equal(row.inputs.length, T);
    assert.equal(row.targets.length, T);
    // The evaluation prompt is a prefix of the row's inputs: generate() (startIds []) sees what training saw.
    const prompt = tok.encode(s.prompt);
    assert.deepEqual(Array.from(row.inputs.subarray(0, prompt.length)), prompt);
    // Scored: the target after the prompt's last byte is the key's first digit, and so on for each digit.
    const scored = [...row.targets.keys()].filter((t) => row.targets[t] !== IGNORE);
    assert.deepEqual(scored, Array.from({ length: KEY_DIGITS }, (_, i) => prompt.length - 1 + i));
    assert.equal(tok.decode(scored.map((t) => row.targets[t])), s.key);
    // Each scored digit's input is the byte before it: the question's last space, then the key's digits.
    assert.equal(tok.decode(scored.map((t) => row.inputs[t])), ` ${s.key.slice(0, -1)}`);
    // scoreAll: every target is the next byte.
    const all = passkeyRow(s, tok, true);
    assert.deepEqual(Array.from(all.inputs), Array.from(row.inputs));
    assert.deepEqual(Array.from(all.targets), tok.encode(s.text).slice(1));
  });

  it('mixes passkey rows into the language-model batches at the given rate, the rest untouched', () => {
    const tok = byteTokenizer();
    const B = 16, T = 100, lmId = 7;
    const lm = { batchAt: () => ({ inputs: new Int32Array(B * T).fill(lmId), targets: new Int32Array(B * T).fill(lmId) }) };
    const batches = passkeyMixBatches(lm, { seed: 3, batch: B, length: T, mix: 0.75, scoreAll: false, filler, tok });
    let passkeyRows = 0, rows = 0;
    const keys = new Set<string>();
    for (let step = 0; step < 8; step++) {
      const { inputs, targets } = batches.batchAt(step);
      for (let b = 0; b < B; b++) {
        rows++;
        const inp = inputs.subarray(b * T, (b + 1) * T), tgt = targets.subarray(b * T, (b + 1) * T);
        if (inp.every((x) => x === lmId)) { assert.ok(tgt.every((x) => x === lmId), 'a language-model row keeps its targets'); continue; }
        passkeyRows++;
        const text = tok.decode(Array.from(inp));
        const key = text.match(/The pass key is (\d{5})\. Remember it\./)![1];
        assert.ok(text.endsWith(`${QUESTION}${key.slice(0, -1)}`), text);
        assert.equal(tok.decode(Array.from(tgt.subarray(T - KEY_DIGITS))), key);
        assert.ok(tgt.subarray(0, T - KEY_DIGITS).every((x) => x === IGNORE));
        keys.add(key);
      }
    }
    assert.ok(passkeyRows / rows > 0.6 && passkeyRows / rows < 0.9, `${passkeyRows} passkey rows of ${rows}`);
    assert.ok(keys.size > passkeyRows * 0.9, 'keys vary from row to row');
    assert.deepEqual(batches.batchAt(5), batches.batchAt(5), 'a batch is a pure function of the step');
    const wrong = passkeyMixBatches(lm, { seed: 3, batch: B, length: T + 1, mix: 0.75, scoreAll: false, filler, tok });
    assert.throws(() => wrong.batchAt(0), (e) => e instanceof ArgumentError && /holds 1600 inputs and 1600 targets; expected 16 × 101/.test(e.message));
  });

  it('digitsRight counts digits right in place', () => {
    assert.equal(digitsRight('12345', '12345'), 1);
    assert.equal(digitsRight('12045', '12345'), 0.8);
    assert.equal(digitsRight('2345', '12345'), 0, 'a shifted answer scores nothing');
    assert.equal(digitsRight('', '12345'), 0);
  });

  it('rejects a length too short for needle, question and key, and a depth outside [0, 1]', () => {
    assert.throws(() => passkeySample(1, 0, { length: minPasskeyLength() - 1, depth: 0.5, filler }), (e) => e instanceof ArgumentError && /shorter than the \d+ bytes/.test(e.message));
    assert.throws(() => passkeySample(1, 0, { length: 200, depth: 1.5, filler }), (e) => e instanceof ArgumentError && /depth 1.5 must be in \[0, 1\]/.test(e.message));
  });
});

describe('experiment helpers', () => {
  it('parses seeds and mechanisms, naming a bad value', () => {
    assert.deepEqual(parseSeeds('1, 2,3'), [1, 2, 3]);
    assert.throws(() => parseSeeds('1,x'), (e) => e instanceof ArgumentError && /--seeds '1,x'/.test(e.message));
    assert.deepEqual(parseMechanisms('fpa,full'), ['fpa', 'full']);
    assert.throws(() => parseMechanisms('full,rope'), (e) => e instanceof ArgumentError && /'rope' is not one of full, fox, fpa/.test(e.message));
  });

  it('formatTrainRun', () => {
    assert.equal(formatTrainRun({ loss: 1, steps: 300, tokens: 1e6, seconds: 41.25, tokensPerSecond: 12345 }), '300 steps in 41.3 s, 12.3k tokens/s');
    assert.equal(formatTrainRun({ loss: 1, steps: 2, tokens: 64, seconds: 0.5, tokensPerSecond: 128.4 }), '2 steps in 0.5 s, 128 tokens/s');
  });

  it('spreadGateBias: forget gates with memory spans geometric from 2 to the span', () => {
    const b = spreadGateBias(4, 96);
    const tau = Array.from(b, (x) => 1 / (1 - 1 / (1 + Math.exp(-x)))); // f = σ(b) = 1 − 1/τ
    assert.ok(Math.abs(b[0]) < 1e-6, 'the first head keeps FoX\'s init (f = 0.5)');
    assert.ok(Math.abs(tau[3] - 96) < 1e-3, `${tau}`);
    assert.ok(Math.abs(tau[1] / tau[0] - tau[2] / tau[1]) < 1e-3 && Math.abs(tau[2] / tau[1] - tau[3] / tau[2]) < 1e-3, `${tau}`);
    assert.ok(Math.abs(spreadGateBias(1, 50)[0] - Math.log(49)) < 1e-6);
    assert.throws(() => spreadGateBias(4, 1), (e) => e instanceof ArgumentError && /span 1 must be ≥ 2/.test(e.message));
  });

  it('withGateBias sets the forget-gate biases of fox and fpa layers and keeps every other weight', async () => {
    const backend = await backendFlag('cpu');
    const shape = { vocabSize: 257, dModel: 16, nLayers: 2, nHeads: 2, headDim: 8, mlpHidden: 16, contextLength: 32 };
    const bias = Float32Array.of(0.5, 3);
    for (const [arm, gate] of [['fox', 'attn.fgate.bias'], ['fpa', 'attn.fpa.walk.bias']] as const) {
      const model = newModel(mechanismConfig(arm, shape), backend, 7);
      const spread = withGateBias(model, bias);
      const before = new Map(model.namedParameters()), after = new Map(spread.namedParameters());
      assert.deepEqual([...after.keys()], [...before.keys()]);
      let gates = 0;
      for (const [name, p] of after) {
        const want = name.endsWith(gate) ? bias : await before.get(name)!.data();
        if (name.endsWith(gate)) gates++;
        assert.deepEqual(Array.from(await p.data()), Array.from(want), name);
      }
      assert.equal(gates, 2, `one ${gate} per layer`);
      assert.throws(() => withGateBias(model, Float32Array.of(1)), (e) => e instanceof ArgumentError && /has shape \[2\], the bias 1 values/.test(e.message));
      model.dispose();
      spread.dispose();
    }
  });

  it('mechanismConfig pro: fox and fpa get QK-norm, token shift and the output gate; full stays plain RoPE', async () => {
    const shape = { vocabSize: 257, dModel: 16, nLayers: 2, nHeads: 2, headDim: 8, mlpHidden: 16, contextLength: 32 };
    for (const arm of ['fox', 'fpa'] as const) {
      const plain = mechanismConfig(arm, shape), pro = mechanismConfig(arm, shape, { pro: true });
      assert.equal(plain.qkNorm, false);
      assert.equal((plain.attention[0] as { outputGate?: boolean }).outputGate, false, arm);
      assert.equal((plain.attention[0] as { tokenShift?: boolean }).tokenShift, undefined, arm);
      assert.equal(pro.qkNorm, true, arm);
      assert.equal((pro.attention[0] as { outputGate?: boolean }).outputGate, true, arm);
      assert.equal((pro.attention[0] as { tokenShift?: boolean }).tokenShift, true, arm);
      // The spread gate init still finds the gates of a Pro model.
      const backend = await backendFlag('cpu');
      const model = newModel(pro, backend, 3), spread = withGateBias(model, Float32Array.of(0.5, 3)), base = newModel(plain, backend, 3);
      assert.ok(spread.parameterCount() > base.parameterCount(), 'Pro adds the shift and gate weights');
      model.dispose(); spread.dispose(); base.dispose();
    }
    const full = mechanismConfig('full', shape, { pro: true });
    assert.equal(full.qkNorm, false);
    assert.equal(full.positions, 'rope');
    assert.deepEqual(full.attention[0], mechanismConfig('full', shape).attention[0]);
  });

  it('meanStd and markdownTable', () => {
    const s = meanStd([1, 2, 3, 4]);
    assert.equal(s.mean, 2.5);
    assert.ok(Math.abs(s.std - Math.sqrt(5 / 3)) < 1e-12);
    assert.deepEqual(meanStd([7]), { mean: 7, std: 0 });
    assert.equal(markdownTable(['a', 'bb'], [['xyz', '1']]), '| a   | bb |\n|-----|----|\n| xyz | 1  |');
  });
});

describe('scripts end to end (cpu, tiny settings)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'fon-experiments-'));
  after(() => rmSync(dir, { recursive: true, force: true }));
  const tiny = ['--backend', 'cpu', '--d-model', '16', '--heads', '2', '--head-dim', '8', '--mlp-hidden', '16'];
  const run = (script: string, args: string[]) => {
    const json = join(dir, `${script}.json`);
    const r = spawnSync(process.execPath, ['--import', 'tsx', `experiments/${script}.ts`, ...tiny, ...args, '--json', json], { encoding: 'utf8', timeout: 60_000 });
    assert.equal(r.status, 0, `${script} exited ${r.status}:\n${r.stderr}`);
    return { out: r.stdout, err: r.stderr, json: JSON.parse(readFileSync(json, 'utf8')) };
  };
  const fraction = (x: unknown) => typeof x === 'number' && x >= 0 && x <= 1;

  it('stack_task', () => {
    const { out, json } = run('stack_task', ['--seeds', '1,2', '--steps', '2', '--batch', '2', '--length', '24', '--eval-length', '32', '--depth', '3', '--eval-depth', '5', '--eval-seqs', '3']);
    assert.match(out, /\| mechanism +\| seed \|/);
    assert.equal(json.experiment, 'stack_task');
    assert.match(json.command, /experiments\/stack_task\.ts/);
    assert.equal(json.results.length, 6);
    for (const r of json.results) {
      assert.ok(['full', 'fox', 'fpa'].includes(r.mechanism) && [1, 2].includes(r.seed));
      assert.ok(fraction(r.heldOut) && fraction(r.deeper) && Number.isFinite(r.trainLoss) && r.parameters > 0, JSON.stringify(r));
      assert.ok(r.trainSeconds > 0 && r.trainTokensPerSecond > 0, JSON.stringify(r));
    }
    assert.equal(json.baselines.length, 2);
    assert.equal(json.settings.deeper.maxDepth, 5);
  });

  it('lighthouse', () => {
    const { out, json } = run('lighthouse', ['--seeds', '1', '--context', '64', '--steps', '4', '--batch', '2', '--fraction', '0.5', '--levels', '2', '--pool', '2', '--topk', '8', '--tile', '4', '--layers', '1', '--eval-windows', '2']);
    assert.match(out, /\| lighthouse 0\.5 → full \| 1 +\|/);
    assert.match(out, /\| 1\.4–1\.7× less total training time +\| [\d.]+ ± [\d.]+× +\| (holds|does not hold) +\|/);
    assert.equal(json.experiment, 'lighthouse');
    assert.equal(json.settings.switchStep, 2);
    assert.equal(json.settings.schedule, 'constant', "the paper's schedule by default");
    assert.deepEqual(json.runs.map((r: { arm: string }) => r.arm), ['dense', 'lighthouse']);
    for (const r of json.runs) assert.ok(r.losses.length === 4 && r.losses.every(Number.isFinite) && r.seconds > 0 && Number.isFinite(r.valLoss), JSON.stringify(r));
    assert.notDeepEqual(json.runs[0].losses.slice(0, 2), json.runs[1].losses.slice(0, 2), 'the first phase trains with Lighthouse');
    assert.ok(existsSync(join(dir, 'lighthouse-loss.svg')));
  });

  it('lighthouse into a sparse target (--target local:16): the first arm runs the target throughout, the second recovers into it', () => {
    const { out, json } = run('lighthouse', ['--seeds', '1', '--context', '64', '--steps', '4', '--batch', '2', '--fraction', '0.5', '--levels', '2', '--pool', '2', '--topk', '8', '--tile', '4', '--layers', '1', '--eval-windows', '2', '--target', 'local:16']);
    assert.match(out, /\| local:16 +\| 1 +\|/);
    assert.match(out, /\| lighthouse 0\.5 → local:16 \| 1 +\|/);
    assert.match(out, /\| final loss after recovery at or below local:16's \|/);
    assert.equal(json.settings.target, 'local:16');
    assert.deepEqual(json.settings.model.attention.map((a: { type: string; window?: number }) => [a.type, a.window]), [['local', 16]]);
    const bad = spawnSync(process.execPath, ['--import', 'tsx', 'experiments/lighthouse.ts', '--target', 'local'], { encoding: 'utf8', timeout: 60_000 });
    assert.notEqual(bad.status, 0);
    assert.match(bad.stderr, /--target "local": expected full, local:W \(a window of W tokens\), fox or fpa/);
    const badSchedule = spawnSync(process.execPath, ['--import', 'tsx', 'experiments/lighthouse.ts', '--schedule', 'linear'], { encoding: 'utf8', timeout: 60_000 });
    assert.notEqual(badSchedule.status, 0);
    assert.match(badSchedule.stderr, /--schedule "linear": expected constant \(the paper's\) or cosine/);
  });

  it('passkey', () => {
    const { out, err, json } = run('passkey', ['--seeds', '1', '--steps', '2', '--batch', '2', '--length', '96', '--layers', '1', '--multiples', '1,2', '--depths', '0.1,0.9', '--trials', '1']);
    assert.match(out, /fpa-evict/);
    assert.match(out, /\| arm +\| seed \| train loss \| train s \| tokens\/s \|/);
    for (const arm of ['full', 'fox', 'fpa']) assert.match(err, new RegExp(`${arm} seed 1: trained 2 steps in [\\d.]+ s, [\\d.]+k? tokens/s`));
    assert.equal(json.settings.score, 'answer');
    assert.equal(json.experiment, 'passkey');
    assert.deepEqual(json.arms, ['full', 'fox', 'fpa', 'fpa-evict']);
    assert.equal(json.cells.length, 4 * 2 * 2);
    for (const c of json.cells) {
      assert.ok(fraction(c.accuracy) && fraction(c.digits) && fraction(c.kept) && c.digits >= c.accuracy, JSON.stringify(c));
      assert.equal(c.length, 96 * c.multiple);
      assert.match(c.example.key, /^\d{5}$/);
      assert.equal(typeof c.example.generated, 'string');
      if (c.arm !== 'fpa-evict') assert.equal(c.kept, 1, `${c.arm} keeps every key`);
    }
    assert.equal(json.trained.length, 4);
    for (const t of json.trained) assert.ok(t.trainSeconds > 0 && t.trainTokensPerSecond > 0 && Number.isFinite(t.trainLoss), JSON.stringify(t));
    assert.equal(json.summary.length, 4 * 2);
    const svg = readFileSync(join(dir, 'passkey.svg'), 'utf8');
    assert.equal((svg.match(/<polyline /g) ?? []).length, 4, 'one line per arm');
    assert.match(svg, /data-name="fpa-evict \(cache kept \d+%, \d+%\)"/);
  });

  it('lm_compare', () => {
    const { out, json } = run('lm_compare', ['--seeds', '1', '--steps', '2', '--batch', '2', '--context', '32', '--layers', '1', '--eval-windows', '2']);
    assert.match(out, /fpa \/ fox perplexity/);
    assert.equal(json.experiment, 'lm_compare');
    assert.equal(json.data, 'builtin:brown');
    assert.equal(json.results.length, 3);
    for (const r of json.results) {
      assert.equal(r.tokens, 64, 'two windows of 32');
      assert.ok(r.trainSeconds > 0 && r.trainTokensPerSecond > 0, JSON.stringify(r));
      assert.ok(r.perplexity > 1 && Number.isFinite(r.perplexity) && r.bitsPerByte > 0, JSON.stringify(r));
      assert.ok(Math.abs(r.bitsPerByte - r.loss / Math.LN2) < 1e-9, 'one byte per token');
    }
    assert.equal(json.fpaOverFox.length, 1);
    assert.ok(Math.abs(json.fpaOverFox[0].ratio - json.results[2].perplexity / json.results[1].perplexity) < 1e-12);
  });

  it('a bad flag fails with the value named', () => {
    const r = spawnSync(process.execPath, ['--import', 'tsx', 'experiments/stack_task.ts', '--backend', 'cpu', '--mechanisms', 'full,rope'], { encoding: 'utf8', timeout: 30_000 });
    assert.notEqual(r.status, 0);
    assert.match(r.stderr, /'rope' is not one of full, fox, fpa/);
  });
});
