/** Progress line: terminal redraw vs plain lines, rate over a window, ETA, fields; fake stream and clock. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ArgumentError } from '../../src/errors.ts';
import { Progress, formatCount, formatDuration, type ProgressStream } from '../../src/cli/progress.ts';

function fakeStream(isTTY: boolean, columns = 80): ProgressStream & { out: string[] } {
  const out: string[] = [];
  return { out, isTTY, columns, write(s: string) { out.push(s); return true; } };
}

function fakeClock() {
  let ms = 1000;
  return { now: () => ms, advance: (s: number) => { ms += s * 1000; } };
}

test('formatCount and formatDuration', () => {
  assert.deepEqual([0, 7, 999, 1000, 1234, 1200, 999_499, 999_500, 45_600_000, 2.5e12, 0.5, 120.4].map(formatCount),
    ['0', '7', '999', '1k', '1.23k', '1.2k', '999k', '1M', '45.6M', '2.5T', '0.5', '120']);
  assert.deepEqual([0, 42.4, 59.6, 185, 3600, 3720, 90000, -1, Infinity].map(formatDuration),
    ['0s', '42s', '1m00s', '3m05s', '1h00m', '1h02m', '1d01h', '?', '?']);
});

test('plain mode: a line at most every intervalS, then a final line with the average rate', () => {
  const s = fakeStream(false);
  const c = fakeClock();
  const p = new Progress({ total: 1000, label: 'train', unit: 'tok', stream: s, intervalS: 5, now: c.now });
  for (let i = 1; i <= 9; i++) { c.advance(1); p.tick(100, { loss: 3.21 + i / 1000 }); }
  // 9 seconds, interval 5: exactly one line, at t = 5 s (500 tokens at 100 tok/s, 500 left).
  assert.deepEqual(s.out, ['train  50%  500/1k tok  100 tok/s  ETA 5s  loss 3.215\n']);
  c.advance(1);
  p.tick(100);
  assert.equal(s.out.length, 2, 'second line 5 s after the first');
  assert.equal(s.out[1], 'train 100%  1k/1k tok  100 tok/s  ETA 0s  loss 3.219\n');
  c.advance(10);
  p.finish({ loss: 2 });
  assert.equal(s.out[2], 'train 100%  1k/1k tok  50 tok/s  in 20s  loss 2\n');
  assert.ok(s.out.every((l) => !l.includes('\r')), 'no carriage returns in a file');
  p.tick(5);
  p.finish();
  assert.equal(s.out.length, 3, 'finish is final and idempotent');
});

test('terminal mode: redraws one line with \\r, throttled, a bar that fits the width, newline at the end', () => {
  const s = fakeStream(true, 60);
  const c = fakeClock();
  const p = new Progress({ total: 200, label: 'eval', stream: s, redrawS: 0.5, now: c.now });
  c.advance(1);
  p.update(50);
  c.advance(0.1);
  p.update(60); // within redrawS: no redraw
  assert.equal(s.out.length, 1);
  const line = s.out[0];
  assert.ok(line.startsWith('\r') && line.endsWith('\x1b[K'), JSON.stringify(line));
  const text = line.slice(1, -3);
  assert.ok(text.length <= 59, `fits 60 columns: ${text.length}`);
  assert.match(text, /^eval \[#+\.+\]  {2}25%  50\/200  50\/s  ETA 3s$/);
  const bar = /\[([#.]+)\]/.exec(text)![1];
  assert.equal(bar.split('#').length - 1, Math.round(bar.length * 0.25));
  c.advance(1);
  p.update(200);
  c.advance(1);
  p.finish();
  const last = s.out[s.out.length - 1];
  assert.ok(last.startsWith('\r') && last.endsWith('\x1b[K\n'));
  assert.match(last, /100%  200\/200  64\.5\/s  in 3s/); // 200 in 3.1 s
});

test('terminal mode: a line too long for the width drops the bar, then is clipped', () => {
  const s = fakeStream(true, 40);
  const c = fakeClock();
  const p = new Progress({ total: 10, stream: s, redrawS: 0, now: c.now });
  c.advance(1);
  p.update(1, { loss: 1.5, lr: 0.0003, note: 'a rather long custom field value' });
  const text = s.out[0].slice(1, -3);
  assert.equal(text.length, 39);
  assert.ok(text.endsWith('…'));
  assert.ok(!text.includes('['), 'no bar when there is no room');
  assert.equal(text, ' 10%  1/10  1/s  ETA 9s  loss 1.5  lr …');
  const wide = new Progress({ total: 10, stream: fakeStream(true, 200), now: c.now });
  wide.update(1, { lr: 0.0003, tokens: 12_345_678.9 });
  assert.match(wide.render(), /lr 3\.000e-4  tokens 1\.235e\+7$/);
});

test('unknown total: count, rate and elapsed, no percentage or ETA', () => {
  const s = fakeStream(false);
  const c = fakeClock();
  const p = new Progress({ unit: 'files', stream: s, intervalS: 1, now: c.now });
  c.advance(2);
  p.update(3);
  assert.deepEqual(s.out, ['3 files  1.5 files/s  2s\n']);
});

test('the rate follows the recent window, not the average since start', () => {
  const s = fakeStream(false);
  const c = fakeClock();
  const p = new Progress({ total: 100_000, stream: s, intervalS: 1e9, rateWindowS: 10, now: c.now });
  for (let i = 0; i < 30; i++) { c.advance(1); p.tick(10); } // slow start: 10/s
  for (let i = 0; i < 30; i++) { c.advance(1); p.tick(1000); } // then 1000/s
  assert.equal(s.out.length, 0);
  assert.match(p.render(), /  1k\/s  ETA 1m10s$/, p.render()); // (100000 − 30300) / 1000 = 69.7 s; the 10/s start would say hours
});

test('log() prints above the bar on a terminal and redraws it', () => {
  const s = fakeStream(true, 80);
  const c = fakeClock();
  const p = new Progress({ total: 4, stream: s, redrawS: 0, now: c.now });
  c.advance(1);
  p.tick();
  p.log('val loss 2.5');
  assert.equal(s.out[1], '\r\x1b[Kval loss 2.5\n');
  assert.ok(s.out[2].startsWith('\r') && s.out[2].includes(' 25%'));
  const plain = fakeStream(false);
  new Progress({ stream: plain, now: c.now }).log('hello');
  assert.deepEqual(plain.out, ['hello\n']);
});

test('bad options are refused', () => {
  const s = fakeStream(false);
  assert.throws(() => new Progress({ total: -1, stream: s }), (e: unknown) => e instanceof ArgumentError && /total -1 must be a non-negative number/.test(e.message));
  assert.throws(() => new Progress({ intervalS: NaN, stream: s }), /intervalS NaN must be a non-negative number of seconds/);
  assert.throws(() => new Progress({ stream: s }).update(Infinity), /count Infinity must be a finite number/);
});

test('a bar that starts part-way (a resumed run) counts the earlier items but not in the rate', () => {
  const s = fakeStream(false);
  const c = fakeClock();
  const p = new Progress({ total: 1000, unit: 'tok', stream: s, intervalS: 5, now: c.now, start: 600 });
  for (let i = 1; i <= 5; i++) { c.advance(1); p.tick(50); }
  assert.deepEqual(s.out, [' 85%  850/1k tok  50 tok/s  ETA 3s\n']);
  c.advance(5);
  p.finish();
  assert.equal(s.out[1], ' 85%  850/1k tok  25 tok/s  in 10s\n');
});
