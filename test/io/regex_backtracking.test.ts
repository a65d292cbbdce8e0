/**
 * Split patterns that would backtrack exponentially are refused at load, and every published
 * pattern is not: the check (src/io/tokenizer/regex_backtracking.ts) against real tokenizers'
 * patterns, hostile ones, and a tokenizer.json that carries one.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { UnsupportedError } from '../../src/errors.ts';
import { exponentialBacktracking } from '../../src/io/tokenizer/regex_backtracking.ts';
import { compileOnigPattern, GPT2_PATTERN } from '../../src/io/tokenizer/pretokenize.ts';
import { loadTokenizer } from '../../src/io/tokenizer/tokenizer.ts';

/** Split patterns as published in tokenizer.json files (GPT-2, Llama 3, Qwen2, GPT-4o/o200k, DeepSeek-V3's three, Bloom). */
const PUBLISHED: Record<string, string> = {
  gpt2: GPT2_PATTERN,
  llama3: "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
  qwen2: "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
  o200k: "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
  deepseekDigits: '\\p{N}{1,3}',
  deepseekCjk: '[一-龥\u3040-ゟ゠-ヿ]+',
  deepseekWords: "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
  bloom: ' ?[^(\\s|[.,!?…。，、।۔،])]+',
};

test('published split patterns pass the check and compile', () => {
  for (const [name, pattern] of Object.entries(PUBLISHED)) {
    assert.equal(exponentialBacktracking(pattern), undefined, name);
    if (name !== 'bloom') compileOnigPattern(pattern, name); // Bloom's nested class is an UnsupportedError of its own
  }
});

test('harmless repetition is not refused: quantified plain groups, optional alternations, counted atoms, literal braces', () => {
  for (const p of ['(ab)+', "(?:'s|'t)?", 'a{2}\\d{1,3}', '(a+){1}', 'x{', '{,}', '[(|)]+', '(?i:ab)+', '\\p{L}+(?!\\S)', '(?<name>ab)*']) {
    assert.equal(exponentialBacktracking(p), undefined, p);
  }
});

test('nested repetition, repeated alternation and back-references are refused, each with the quantifier and group named', () => {
  const cases: Array<[string, RegExp]> = [
    ['(a+)+$', /quantifier "\+" at 4 on the group "\(a\+\)"/],
    ['(a|a)*', /quantifier "\*" at 5 on the group "\(a\|a\)"/],
    ['(?:a?b?)*c', /quantifier "\*" at 8 on the group "\(\?:a\?b\?\)"/],
    ['x((a|b)c)+', /quantifier "\+" at 9 on the group "\(\(a\|b\)c\)"/],
    ["(\\s*){2,}", /quantifier "\{2,\}" at 5/],
    ['(a+){2,5}?', /quantifier "\{2,5\}\?" at 4/],
    ['(?i:a+)+', /quantifier "\+" at 7 on the group "\(\?i:a\+\)"/],
    ['([)]+)*', /quantifier "\*" at 6 on the group "\(\[\)\]\+\)"/],
    ['(a)\\1', /back-reference or subexpression call \("\\1" at 3\)/],
    ['(?<n>a)\\k<n>', /back-reference/],
  ];
  for (const [p, why] of cases) {
    const reason = exponentialBacktracking(p);
    assert.ok(reason !== undefined, p);
    assert.match(reason, why, p);
    assert.throws(() => compileOnigPattern(p, 'x.json: pre_tokenizer'), (e: unknown) => e instanceof UnsupportedError && e.message.startsWith(`x.json: pre_tokenizer: regex ${JSON.stringify(p)} is refused: it has `), p);
  }
});

test('a tokenizer.json whose Split pattern is (a+)+$ is an UnsupportedError naming the file and the step, before any text is encoded', () => {
  const json = JSON.parse(readFileSync(new URL('../fixtures/tokenizer/llama3_style.json', import.meta.url), 'utf8')) as { pre_tokenizer: { pretokenizers: Array<{ pattern: unknown }> } };
  json.pre_tokenizer.pretokenizers[0].pattern = { Regex: '(a+)+$' };
  assert.throws(() => loadTokenizer(json, 'hostile/tokenizer.json'), (e: unknown) =>
    e instanceof UnsupportedError && e.message.startsWith('hostile/tokenizer.json: pre_tokenizer.pretokenizers[0].pattern: regex "(a+)+$" is refused'));
});
