/**
 * The defect classes the first fuzzer run found (issue 18), one example each, run again: prints
 * what FON does with each now, as a table row (the class, the example, the outcome and its message).
 *
 *   node --import tsx dev/fuzz/known_classes.ts
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, unlinkSync, writeFileSync, cpSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { initBackend } from '../../src/backend/registry.ts';
import { FonError } from '../../src/errors.ts';
import { resolveCheckpointDir } from '../../src/io/checkpoint_dir.ts';
import { hfConfigToModelConfig } from '../../src/io/hf/config.ts';
import { loadModel, readTrainerState } from '../../src/io/model_checkpoint.ts';
import { decodeSafetensors, encodeSafetensors } from '../../src/io/safetensors.ts';
import { loadTokenizer, parseTokenizer } from '../../src/io/tokenizer/tokenizer.ts';
import { parseModelConfig } from '../../src/model/config.ts';
import { Decoder } from '../../src/model/decoder.ts';
import { ParamFactory } from '../../src/nn/params.ts';
import { parseTrainConfig } from '../../src/train/trainer.ts';
import { makeBases } from './loader_fuzz.ts';

const cpu = await initBackend('cpu');
const dir = mkdtempSync(join(tmpdir(), 'fon-known-'));
const bases = makeBases(dir);
const fresh = (base: string, name: string) => { const to = join(dir, name); cpSync(base, to, { recursive: true }); return to; };
const rows: string[] = [];

/** Runs one example and records its outcome: what it returned (`ok` describes it) or the error's class and message. */
async function row(kind: string, example: string, run: () => Promise<string> | string): Promise<void> {
  const t0 = performance.now();
  let outcome: string;
  try {
    outcome = `accepted: ${await run()}`;
  } catch (e) {
    const err = e as Error;
    outcome = `${e instanceof FonError ? '' : 'NOT A FonError: '}${err.name}: ${err.message.replace(dir, '…').slice(0, 170)}`;
  }
  rows.push(`| ${kind} | ${example} | ${outcome.replace(/\|/g, '\\|').replace(/\n/g, ' ')} (${(performance.now() - t0).toFixed(0)} ms) |`);
}

const loads = async (path: string) => { const m = await loadModel(path, cpu); m.model.dispose(); return 'loaded'; };
const deep = (n: number) => `${'['.repeat(n)}${']'.repeat(n)}`;
const ckptDir = await resolveCheckpointDir(bases.checkpoint);
const stepName = ckptDir.split('/').at(-1)!;

{
  const f = fresh(bases.hfSingle, 'eisdir');
  unlinkSync(join(f, 'config.json'));
  mkdirSync(join(f, 'config.json'));
  await row('plain Node error', '`config.json` is a directory', () => loads(f));
}
{
  const f = fresh(bases.checkpoint, 'eloop-step');
  rmSync(join(f, stepName), { recursive: true });
  symlinkSync(join(f, stepName), join(f, stepName));
  await row('plain Node error', 'a step folder that is a symlink loop', () => loads(f));
  const g = fresh(bases.checkpoint, 'eloop-model');
  unlinkSync(join(g, stepName, 'model.safetensors'));
  symlinkSync(join(g, stepName, 'model.safetensors'), join(g, stepName, 'model.safetensors'));
  await row('plain Node error', '`model.safetensors` that is a symlink loop', () => loads(g));
}
{
  const f = fresh(bases.checkpoint, 'nul');
  writeFileSync(join(f, 'latest.json'), JSON.stringify({ checkpoint: `${stepName}\u0000` }));
  await row('plain Node error', 'a NUL byte in the name `latest.json` points to', () => loads(f));
}
{
  const tok = readFileSync(join(bases.hfSingle, 'tokenizer.json'), 'utf8');
  await row('plain Node error', 'arrays nested 10,000 deep in tokenizer.json', () => { parseTokenizer(tok.replace('"added_tokens":', `"deep":${deep(10_000)},"added_tokens":`), 'tokenizer.json'); return 'loaded'; });
  const hf = JSON.parse(readFileSync(join(bases.hfSingle, 'config.json'), 'utf8'));
  const f = fresh(bases.hfSingle, 'deep-hf');
  writeFileSync(join(f, 'config.json'), JSON.stringify(hf).replace('{', `{"deep":${deep(10_000)},`));
  await row('plain Node error', 'arrays nested 10,000 deep in an HF config.json', () => loads(f));
  const g = fresh(bases.checkpoint, 'deep-fon');
  const cfgPath = join(g, stepName, 'config.json');
  writeFileSync(cfgPath, readFileSync(cfgPath, 'utf8').replace('{', `{"deep":${deep(10_000)},`));
  await row('plain Node error', 'arrays nested 10,000 deep in a FON config.json', () => loads(g));
  await row('plain Node error', 'a BigInt reaching config formatting (`parseModelConfig({ dModel: 12n })`)', () => { parseModelConfig({ dModel: 12n }); return 'parsed'; });
  await row('plain Node error', 'a BigInt in an HF config (`hfConfigToModelConfig`)', () => { hfConfigToModelConfig({ ...hf, n_embd: 12n }); return 'parsed'; });
}
{
  const json = JSON.parse(readFileSync(join(bases.hfSharded, 'tokenizer.json'), 'utf8'));
  json.added_tokens.push({ id: 5000, content: '<|im-start|>', single_word: false, lstrip: false, rstrip: false, normalized: false, special: true });
  await row('valid tokenizer rejected', 'an added token `<|im-start|>`', () => {
    const t = loadTokenizer(json, 'tokenizer.json');
    return `encodes "a<|im-start|>a" (allowSpecial) as [${t.encode('a<|im-start|>a', { allowSpecial: true })}]`;
  });
  const split = structuredClone(json);
  split.pre_tokenizer.pretokenizers[0].pattern = { String: 'a-b' };
  await row('valid tokenizer rejected', 'a Split pre-tokenizer string pattern `"a-b"`', () => { const t = loadTokenizer(split, 'tokenizer.json'); return `round-trips "xa-by": ${t.decode(t.encode('xa-by')) === 'xa-by'}`; });
  const hang = structuredClone(json);
  hang.pre_tokenizer.pretokenizers[0].pattern = { Regex: '(a+)+$' };
  await row('a hang', 'a Split regex `(a+)+$` (then 30 a\'s and a b encoded)', () => { const t = loadTokenizer(hang, 'tokenizer.json'); return `${t.encode(`${'a'.repeat(30)}b`).length} ids`; });
}
await row('out of memory', 'a config with a context of 2²¹ and head_dim 1024, built', () => {
  const m = new Decoder(parseModelConfig({ vocabSize: 64, dModel: 16, nLayers: 1, nHeads: 1, nKvHeads: 1, headDim: 1024, mlpHidden: 16, contextLength: 2 ** 21 }), new ParamFactory({ backend: cpu, seed: 1 }));
  const rows = m.ropePositions;
  m.dispose();
  return `built; RoPE tables hold ${rows} positions until asked for more`;
});
{
  const trainer = JSON.parse(readFileSync(join(ckptDir, 'trainer.json'), 'utf8'));
  const tryResume = async (patch: (s: typeof trainer) => void) => {
    const f = fresh(bases.checkpoint, `trainer-${rows.length}`);
    const d = await resolveCheckpointDir(f);
    const s = structuredClone(trainer);
    patch(s);
    writeFileSync(join(d, 'trainer.json'), JSON.stringify(s));
    const state = await readTrainerState(d);
    parseTrainConfig(state.run.train, `${d}/trainer.json: run.train`);
    return 'resume would run';
  };
  await row('accepted though invalid', 'trainer.json `optimizerScalars.lr = {}`', () => tryResume((s) => { s.optimizerScalars.lr = {}; }));
  await row('accepted though invalid', 'trainer.json `optimizerScalars.t = {}`', () => tryResume((s) => { s.optimizerScalars.t = {}; }));
  await row('accepted though invalid', 'trainer.json `run.train.beta1 = null`', () => tryResume((s) => { s.run.train.beta1 = null; }));
}
{
  const json = JSON.parse(readFileSync(join(bases.hfSingle, 'tokenizer.json'), 'utf8'));
  await row('accepted though invalid', 'a tokenizer whose vocabulary is empty but whose merges refer to tokens', () => { loadTokenizer({ ...json, model: { ...json.model, vocab: {} } }, 'tokenizer.json'); return 'loaded'; });
  await row('accepted though invalid', 'a post-processor putting id 277000 before every text, no token having it', () => {
    loadTokenizer({ ...json, post_processor: { type: 'RobertaProcessing', sep: ['</s>', 2], cls: ['<s>', 277000] } }, 'tokenizer.json');
    return 'loaded';
  });
}
await row('accepted though invalid', 'a safetensors tensor named `__proto__`', () => {
  const d = decodeSafetensors(encodeSafetensors({ ['__proto__']: { dtype: 'F32', shape: [1], data: new Float32Array([7]) } }), 'x.safetensors');
  return `kept: tensors ${JSON.stringify(Object.keys(d.tensors))}`;
});

console.log('| class (first run) | example | now |\n|---|---|---|');
for (const r of rows) console.log(r);
rmSync(dir, { recursive: true, force: true });
