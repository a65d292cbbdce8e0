/** `fon tokenize`: the token ids of a text under the tokenizer of a FON checkpoint or a Hugging Face folder. */
import { readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { ArgumentError } from '../errors.ts';
import { LATEST_FILE, resolveCheckpointDir } from '../io/checkpoint_dir.ts';
import { TOKENIZER_FILE } from '../io/model_checkpoint.ts';
import { tokenizerConfigOptions } from '../io/tokenizer/hf_config.ts';
import { parseTokenizer, type Tokenizer } from '../io/tokenizer/tokenizer.ts';
import { parseFlags, requireFlag, UsageError } from './args.ts';

export const TOKENIZE_USAGE = `usage: fon tokenize --model DIR --text TEXT [--json] [--no-special]

Prints the token ids of TEXT, separated by spaces. DIR is a FON checkpoint (an output directory of
fon train, or one of its step-N directories) or a Hugging Face model folder holding tokenizer.json
(its tokenizer_config.json, when present, names the end-of-text token). The ids are those of the
tokenizers library's encode(TEXT, add_special_tokens=False): an added or special token written in
TEXT (such as <|endoftext|>) is one id, and no BOS or EOS is added.

options:
  --json             print one JSON object: {"ids": [...], "tokens": [...]}, the tokens in the
                     vocabulary's byte-level spelling (a leading space is "Ġ")
  --no-special       special tokens written in TEXT are ordinary text, as fon train and fon generate
                     encode their text (non-special added tokens still count)`;

const TOKENIZER_CONFIG_FILE = 'tokenizer_config.json';

async function kindOf(path: string): Promise<'file' | 'dir' | null> {
  try {
    const s = await stat(path);
    return s.isDirectory() ? 'dir' : s.isFile() ? 'file' : null;
  } catch {
    return null;
  }
}

async function readText(path: string): Promise<string> {
  try {
    return await readFile(path, 'utf8');
  } catch (e) {
    throw new ArgumentError(`cannot read ${path} (${(e as Error).message})`);
  }
}

/**
 * The tokenizer of DIR: a FON output directory (latest.json names the checkpoint) or any folder
 * with tokenizer.json at the top (a checkpoint's step directory, a Hugging Face model folder), with
 * the eos token of tokenizer_config.json when the folder has one.
 */
export async function loadTokenizerDir(dir: string): Promise<{ tokenizer: Tokenizer; file: string }> {
  const kind = await kindOf(dir);
  if (kind === null) throw new UsageError(`tokenize: --model ${dir}: no such directory`);
  if (kind !== 'dir') throw new UsageError(`tokenize: --model ${dir} is not a directory (expected a FON checkpoint or a folder with ${TOKENIZER_FILE})`);
  const folder = (await kindOf(join(dir, LATEST_FILE))) === 'file' ? await resolveCheckpointDir(dir) : dir;
  const file = join(folder, TOKENIZER_FILE);
  if ((await kindOf(file)) !== 'file') throw new ArgumentError(`no ${TOKENIZER_FILE} in ${folder} (looked for ${file})`);
  const configFile = join(folder, TOKENIZER_CONFIG_FILE);
  let opts = {};
  if ((await kindOf(configFile)) === 'file') {
    let config: unknown;
    try {
      config = JSON.parse(await readText(configFile));
    } catch (e) {
      if (e instanceof ArgumentError) throw e;
      throw new ArgumentError(`${configFile}: not valid JSON (${(e as Error).message})`);
    }
    opts = tokenizerConfigOptions(config, configFile);
  }
  return { tokenizer: parseTokenizer(await readText(file), file, opts), file };
}

export async function tokenizeCommand(argv: string[]): Promise<number> {
  const { values: v } = parseFlags('tokenize', argv, {
    model: { type: 'string' }, text: { type: 'string' }, json: { type: 'boolean' }, 'no-special': { type: 'boolean' },
  });
  if (v.help) { console.log(TOKENIZE_USAGE); return 0; }
  const dir = requireFlag('tokenize', 'model', v.model);
  if (v.text === undefined) requireFlag('tokenize', 'text', v.text); // an empty TEXT is allowed: no ids
  const { tokenizer } = await loadTokenizerDir(dir);
  const ids = tokenizer.encode(v.text!, { allowSpecial: !v['no-special'] });
  if (v.json) console.log(JSON.stringify({ ids, tokens: ids.map((id) => tokenizer.idToToken(id)) }));
  else console.log(ids.join(' '));
  return 0;
}
