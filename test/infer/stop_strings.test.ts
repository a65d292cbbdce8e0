/**
 * StopMatcher: streamed text passes through, a possible stop prefix is held until decided, the stop
 * string is cut, and the result never depends on how the text is split into pushes.
 * Run: node --import tsx --test test/infer/stop_strings.test.ts
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { StopMatcher } from '../../src/infer/stop_strings.ts';
import { ArgumentError } from '../../src/errors.ts';

interface Run { text: string; stopped: boolean; matched: string | null; emits: string[] }

/** Pushes the pieces in order (stopping at the first stop), then flushes. */
function run(stops: string[], pieces: string[]): Run {
  const m = new StopMatcher(stops);
  const emits: string[] = [];
  let stopped = false;
  for (const p of pieces) {
    const step = m.push(p);
    emits.push(step.emit);
    if (step.stopped) { stopped = true; break; }
  }
  emits.push(m.flush());
  return { text: emits.join(''), stopped, matched: m.matched, emits };
}

/** The definition, checked one character at a time: the first prefix of `text` that ends with a stop. */
function reference(stops: string[], text: string): { text: string; stopped: boolean; matched: string | null } {
  for (let e = 1; e <= text.length; e++) {
    const head = text.slice(0, e);
    const hits = stops.filter((s) => head.endsWith(s)).sort((a, b) => b.length - a.length);
    if (hits.length > 0) return { text: head.slice(0, e - hits[0].length), stopped: true, matched: hits[0] };
  }
  return { text, stopped: false, matched: null };
}

/** Every way to cut `text` into non-empty consecutive pieces (2^(n-1) of them). */
function* splits(text: string): Generator<string[]> {
  const n = text.length;
  for (let mask = 0; mask < 1 << Math.max(0, n - 1); mask++) {
    const pieces: string[] = [];
    let start = 0;
    for (let i = 1; i < n; i++) if (mask & (1 << (i - 1))) { pieces.push(text.slice(start, i)); start = i; }
    pieces.push(text.slice(start));
    yield pieces;
  }
}

const cases: Array<{ stops: string[]; text: string; want: string; matched: string | null }> = [
  { stops: ['STOP'], text: 'hi STOP yo', want: 'hi ', matched: 'STOP' },
  { stops: ['abab'], text: 'ababab', want: '', matched: 'abab' },
  { stops: ['abab'], text: 'xabaababy', want: 'xaba', matched: 'abab' },
  { stops: ['aab'], text: 'aaaab', want: 'aa', matched: 'aab' },
  { stops: ['\n\n', 'User:'], text: 'ok\nUser: x\n\n', want: 'ok\n', matched: 'User:' },
  { stops: ['abcd', 'c'], text: 'abcd', want: 'ab', matched: 'c' },
  { stops: ['b', 'ab'], text: 'xab', want: 'x', matched: 'ab' },
  { stops: ['END'], text: 'the EN', want: 'the EN', matched: null },
  { stops: ['<|im_end|>'], text: 'a<|im_x<|im_end|>', want: 'a<|im_x', matched: '<|im_end|>' },
  { stops: [], text: 'plain text', want: 'plain text', matched: null },
];

test('the reference agrees with the hand-written expectations', () => {
  for (const c of cases) {
    const r = reference(c.stops, c.text);
    assert.equal(r.text, c.want, `${JSON.stringify(c)}`);
    assert.equal(r.matched, c.matched);
  }
});

test('every split of the text into pushes gives the same output as the definition', () => {
  for (const c of cases) {
    let count = 0;
    for (const pieces of splits(c.text)) {
      const r = run(c.stops, pieces);
      assert.equal(r.text, c.want, `stops ${JSON.stringify(c.stops)} pieces ${JSON.stringify(pieces)}`);
      assert.equal(r.stopped, c.matched !== null);
      assert.equal(r.matched, c.matched);
      count++;
    }
    assert.equal(count, 2 ** (c.text.length - 1));
  }
});

test('random texts over a small alphabet, every split, against the definition', () => {
  const stops = ['aba', 'bb', 'abaab'];
  let x = 12345;
  const rand = () => ((x = (Math.imul(x, 1103515245) + 12345) >>> 0) / 2 ** 32);
  for (let t = 0; t < 40; t++) {
    const len = 1 + Math.floor(rand() * 9);
    let text = '';
    for (let i = 0; i < len; i++) text += 'ab'[Math.floor(rand() * 2)];
    const want = reference(stops, text);
    for (const pieces of splits(text)) {
      const r = run(stops, pieces);
      assert.deepEqual({ text: r.text, stopped: r.stopped, matched: r.matched }, want, `text ${text} pieces ${JSON.stringify(pieces)}`);
    }
  }
});

test('only a possible stop prefix is held back, and it is released once decided', () => {
  const m = new StopMatcher(['</s>']);
  assert.deepEqual(m.push('abc<'), { emit: 'abc', stopped: false });
  assert.deepEqual(m.push('/'), { emit: '', stopped: false });
  assert.deepEqual(m.push('x y'), { emit: '</x y', stopped: false });
  assert.deepEqual(m.push('z</'), { emit: 'z', stopped: false });
  assert.deepEqual(m.push('s>tail'), { emit: '', stopped: true });
  assert.equal(m.matched, '</s>');
  assert.deepEqual(m.push('more'), { emit: '', stopped: true }, 'nothing passes after a stop');
  assert.equal(m.flush(), '');
});

test('overlapping prefixes: the held tail restarts inside a failed partial match', () => {
  const m = new StopMatcher(['abab']);
  assert.deepEqual(m.push('aba'), { emit: '', stopped: false });
  assert.deepEqual(m.push('a'), { emit: 'aba', stopped: false }, '"abaa": only the last "a" can still start "abab"');
  assert.deepEqual(m.push('ba'), { emit: '', stopped: false });
  assert.deepEqual(m.push('b'), { emit: '', stopped: true }, '"abaabab" = "aba" + "abab"');
});

test('no stops: text passes straight through and flush is empty', () => {
  const m = new StopMatcher([]);
  assert.deepEqual(m.push('a<'), { emit: 'a<', stopped: false });
  assert.deepEqual(m.push(''), { emit: '', stopped: false });
  assert.equal(m.flush(), '');
  assert.equal(m.matched, null);
});

test('flush returns the held tail once, then nothing', () => {
  const m = new StopMatcher(['END', 'ENOUGH']);
  assert.deepEqual(m.push('the EN'), { emit: 'the ', stopped: false });
  assert.equal(m.flush(), 'EN');
  assert.equal(m.flush(), '');
});

test('an empty stop string is an ArgumentError naming it', () => {
  assert.throws(() => new StopMatcher(['ok', '']), (e: unknown) =>
    e instanceof ArgumentError && e.message === 'StopMatcher: stop string 1 must be a non-empty string, got ""');
});
