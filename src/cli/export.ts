/** `fon export`: a FON checkpoint (or a Hugging Face folder) written as a folder transformers loads. */
import { checkExportTarget, exportHf, HF_EXPORT_DTYPES, type HfExportDType } from '../io/hf/export.ts';
import { loadModel } from '../io/model_checkpoint.ts';
import type { Tokenizer } from '../io/tokenizer/tokenizer.ts';
import { joinPath, readFileIfExists } from '../platform/files.ts';
import { parseFlags, requireFlag, UsageError } from './args.ts';
import { backendFromFlag } from './backend_flag.ts';
import { parseJson } from '../io/json.ts';

export const EXPORT_USAGE = `usage: fon export --model DIR --out DIR --format hf [--dtype f32|bf16|f16] [--overwrite]

Writes the model in --model (a FON checkpoint: an output directory of fon train or one of its step-N
directories; or a Hugging Face folder) to the folder --out in the Hugging Face format, which
transformers loads with AutoModelForCausalLM.from_pretrained and AutoTokenizer.from_pretrained:
config.json, model.safetensors, tokenizer.json, tokenizer_config.json, generation_config.json.
The architecture follows from the model's config: GPT2LMHeadModel (LayerNorm, GELU, learned
positions, biases), Qwen3ForCausalLM (QK-norm), Qwen2ForCausalLM (q, k, v biases),
MistralForCausalLM (one sliding window on every layer) or LlamaForCausalLM (full attention); a
config none of them computes is an error naming the key. The folder is written whole or not at
all. Loads on the CPU.

options:
  --format hf        the output format (only hf)
  --dtype D          weight dtype: f32 (default, exact), bf16 or f16
  --overwrite        replace --out when it exists and is not empty
  --allow-non-finite load weights that hold NaN or ±Inf (by default an error names the tensor)`;

/** The bos token a Hugging Face source folder's tokenizer_config.json names, when the tokenizer has it. */
async function sourceBosToken(dir: string, tokenizer: Tokenizer): Promise<string | undefined> {
  const bytes = await readFileIfExists(joinPath(dir, 'tokenizer_config.json')).catch(() => null);
  if (bytes === null) return undefined;
  let json: unknown;
  try {
    json = parseJson(new TextDecoder().decode(bytes), (why) => new UsageError(why));
  } catch {
    return undefined; // the loader already read this file; a bos it cannot name falls back to eos
  }
  const bos = (json as Record<string, unknown> | null)?.bos_token;
  const name = typeof bos === 'string' ? bos : typeof (bos as Record<string, unknown> | null)?.content === 'string' ? (bos as Record<string, string>).content : undefined;
  return name !== undefined && tokenizer.tokenToId(name) !== undefined ? name : undefined;
}

export async function exportCommand(argv: string[]): Promise<number> {
  const { values: v } = parseFlags('export', argv, {
    model: { type: 'string' }, out: { type: 'string' }, format: { type: 'string' }, dtype: { type: 'string' }, overwrite: { type: 'boolean' },
    'allow-non-finite': { type: 'boolean' },
  });
  if (v.help) { console.log(EXPORT_USAGE); return 0; }
  const dir = requireFlag('export', 'model', v.model);
  const out = requireFlag('export', 'out', v.out);
  const format = requireFlag('export', 'format', v.format);
  if (format !== 'hf') throw new UsageError(`export: --format ${JSON.stringify(format)}: expected hf (a Hugging Face folder)`);
  const dtype = (v.dtype ?? 'f32') as HfExportDType;
  if (!HF_EXPORT_DTYPES.includes(dtype)) throw new UsageError(`export: --dtype ${JSON.stringify(v.dtype)}: expected one of ${HF_EXPORT_DTYPES.join(', ')}`);
  await checkExportTarget(out, v.overwrite); // before the model loads
  const loaded = await loadModel(dir, await backendFromFlag('export', 'cpu'), { allowNonFinite: v['allow-non-finite'] });
  try {
    const bosToken = loaded.architecture !== undefined ? await sourceBosToken(loaded.dir, loaded.tokenizer) : undefined;
    // What fon generate puts before a prompt: a Hugging Face model its tokenizer's prefix, a FON model the end-of-text id.
    const startIds = loaded.architecture !== undefined ? loaded.tokenizer.prefixIds : [loaded.tokenizer.eosId];
    const r = await exportHf(loaded.model, loaded.tokenizer, out, { dtype, overwrite: v.overwrite, bosToken, generation: loaded.generation, startIds });
    console.log(`wrote ${r.className} (${r.parameters.toLocaleString('en-US')} parameters, ${dtype}) to ${r.dir}: ${r.files.join(', ')}`);
  } finally {
    loaded.model.dispose();
  }
  return 0;
}
