/**
 * Hostile JSON and hostile values (issue 18): nesting is bounded before anything recursive sees it
 * (io/json.ts parseJson, used by every loader), and a value named in an error is shown bounded and
 * without throwing (errors.ts showValue: BigInt, cycles, deep nesting, megabyte strings), so a
 * config or tokenizer built to crash or flood FON gets one short typed error instead.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ArgumentError, ConfigError, showValue } from '../../src/errors.ts';
import { MAX_JSON_DEPTH, parseJson } from '../../src/io/json.ts';
import { parseTokenizer } from '../../src/io/tokenizer/tokenizer.ts';
import { parseModelConfig } from '../../src/model/config.ts';
import { fon } from '../cli/fon_process.ts';

const dir = mkdtempSync(join(tmpdir(), 'fon-json-'));
test.after(() => rmSync(dir, { recursive: true, force: true }));

const nested = (n: number, open = '[', close = ']') => open.repeat(n) + close.repeat(n);
const fail = (why: string) => new ArgumentError(`f.json: ${why}`);

test('parseJson: nesting past the bound is refused before JSON.parse, naming where; brackets in strings do not count', () => {
  assert.equal(MAX_JSON_DEPTH, 64);
  assert.deepEqual(parseJson(nested(64), fail), JSON.parse(nested(64)), '64 levels parse');
  assert.throws(() => parseJson(nested(65), fail), (e: unknown) => e instanceof ArgumentError
    && e.message === 'f.json: arrays and objects nested more than 64 deep (at character 64): expected at most 64 levels');
  const objects = `${'{"b":'.repeat(100000)}0${'}'.repeat(100000)}`;
  assert.throws(() => parseJson(objects, fail), (e: unknown) => e instanceof ArgumentError && e.message.includes(`nested more than 64 deep (at character ${5 * 64})`));
  const inString = JSON.stringify({ a: '['.repeat(1000), b: 'a \\" [[[[ quote', c: ['\\', '"{'] });
  assert.deepEqual(parseJson(inString, fail), JSON.parse(inString), 'brackets and escaped quotes inside strings');
  assert.throws(() => parseJson('{"a": ', fail), (e: unknown) => e instanceof ArgumentError && e.message.startsWith('f.json: not valid JSON ('));
  assert.throws(() => parseJson(nested(3), fail, 2), /nested more than 2 deep \(at character 2\)/);
});

test('a tokenizer.json nested thousands deep is an ArgumentError naming the file, not a stack overflow', () => {
  const deep = `{"model": {"type": "BPE", "vocab": {}, "merges": ${nested(20000)}}}`;
  assert.throws(() => parseTokenizer(deep, 'models/x/tokenizer.json'), (e: unknown) => e instanceof ArgumentError
    && e.message === `models/x/tokenizer.json: arrays and objects nested more than 64 deep (at character ${deep.indexOf('[') + 62}): expected at most 64 levels`);
});

test('showValue: BigInt, cycles, deep nesting, functions and megabyte strings are shown short and never throw', () => {
  assert.equal(showValue(12n), '12n');
  assert.equal(showValue({ a: 3n }), '{"a":"3n"}');
  const cyc: Record<string, unknown> = {};
  cyc.self = cyc;
  assert.match(showValue(cyc), /^a object that JSON cannot show \(/);
  let deep: unknown = 0;
  for (let i = 0; i < 100000; i++) deep = [deep];
  assert.equal(showValue(deep), 'a array nested too deep to show');
  const fn = () => 1;
  assert.equal(showValue(fn), String(fn), 'a function: its source (JSON has none)');
  const big = 'x'.repeat(8 << 20);
  assert.equal(showValue(big), `"${'x'.repeat(120)}"… (${big.length} characters)`);
  assert.equal(showValue(Array.from({ length: 1000 }, (_, i) => i)).length, 120 + `… (3890 characters)`.length);
  assert.equal(showValue(undefined), 'undefined');
  assert.equal(showValue('ok'), '"ok"');
});

test('a model config with a BigInt, an 8 MB string or an array nested 100000 deep: a short ConfigError', () => {
  const base = { vocabSize: 16, dModel: 8, nLayers: 1, nHeads: 2, headDim: 4, mlpHidden: 16, contextLength: 8 };
  const short = (e: unknown) => e instanceof ConfigError && e.message.length < 600;
  assert.throws(() => parseModelConfig({ ...base, dModel: 8n }), (e: unknown) => short(e) && (e as Error).message.includes('8n'));
  assert.throws(() => parseModelConfig({ ...base, norm: 'x'.repeat(8 << 20) }), (e: unknown) => short(e) && (e as Error).message.includes(`(${8 << 20} characters)`));
  let deep: unknown = 'full';
  for (let i = 0; i < 100000; i++) deep = [deep];
  assert.throws(() => parseModelConfig({ ...base, attention: deep }), short);
});

test('fon info on a config.json nested 20000 deep: one line naming the file, exit 2', () => {
  const d = join(dir, 'deep-config');
  mkdirSync(d);
  const text = `{"format": 1, "model": {"attention": ${nested(20000)}}}`;
  writeFileSync(join(d, 'config.json'), text);
  const r = fon('info', '--model', d);
  assert.equal(r.code, 2, r.err);
  assert.equal(r.err.trim(), `fon: ${join(d, 'config.json')}: arrays and objects nested more than 64 deep (at character ${text.indexOf('[') + 62}): expected at most 64 levels`);
});
