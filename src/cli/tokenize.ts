/** `fon tokenize`: the token ids of a text under the tokenizer of a FON checkpoint or a Hugging Face folder. */
import { ArgumentError } from '../errors.ts';
import { LATEST_FILE, resolveCheckpointDir } from '../io/checkpoint_dir.ts';
import { hfTokenizer } from '../io/hf/tokenizer.ts';
import { TOKENIZER_FILE } from '../io/model_checkpoint.ts';
import type { Tokenizer } from '../io/tokenizer/tokenizer.ts';
import { joinPath, pathKind, readFileIfExists } from '../platform/files.ts';
import { parseFlags, requireFlag, UsageError } from './args.ts';
import { parseJson } from '../io/json.ts';

export const TOKENIZE_USAGE = `usage: fon tokenize --model DIR --text TEXT [--json] [--no-special]

Prints the token ids of TEXT, separated by spaces. DIR is a FON checkpoint (an output directory of
fon train, or one of its step-N directories) or a Hugging Face model folder holding tokenizer.json
(its tokenizer_config.json, when present, names the end-of-text token; one the tokenizer lacks is
ignored). The ids are those of the
tokenizers library's encode(TEXT, add_special_tokens=False): an added or special token written in
TEXT (such as <|endoftext|>) is one id, and no BOS or EOS is added.

options:
  --json             print one JSON object: {"ids": [...], "tokens": [...]}, the tokens in the
                     vocabulary's byte-level spelling (a leading space is "Ġ")
  --no-special       special tokens written in TEXT are ordinary text, as fon train and fon generate
                     encode their text (non-special added tokens still count)`;

/** A file's text, or null when it does not exist; other failures name the file. */
async function readText(path: string): Promise<string | null> {
  try {
    const bytes = await readFileIfExists(path);
    return bytes === null ? null : new TextDecoder().decode(bytes);
  } catch (e) {
    throw new ArgumentError(`cannot read ${path} (${(e as Error).message})`);
  }
}

function parseJsonFile(text: string, path: string): unknown {
  return parseJson(text, (why) => new ArgumentError(`${path}: ${why}`));
}

/**
 * The tokenizer of DIR: a FON output directory (latest.json names the checkpoint) or any folder
 * with tokenizer.json at the top (a checkpoint's step directory, a Hugging Face model folder), with
 * the eos token that tokenizer_config.json names when the folder has one and the token exists
 * (io/hf/tokenizer.ts, as loading the model does).
 */
export async function loadTokenizerDir(dir: string): Promise<{ tokenizer: Tokenizer; file: string }> {
  const kind = await pathKind(dir);
  if (kind === null) throw new UsageError(`tokenize: --model ${dir}: no such directory`);
  if (kind !== 'dir') throw new UsageError(`tokenize: --model ${dir} is not a directory (expected a FON checkpoint or a folder with ${TOKENIZER_FILE})`);
  const folder = (await pathKind(joinPath(dir, LATEST_FILE))) === 'file' ? await resolveCheckpointDir(dir) : dir;
  const file = joinPath(folder, TOKENIZER_FILE);
  const text = await readText(file);
  if (text === null) throw new ArgumentError(`no ${TOKENIZER_FILE} in ${folder} (looked for ${file})`);
  const configFile = joinPath(folder, 'tokenizer_config.json');
  const configText = await readText(configFile);
  const config = configText === null ? undefined : parseJsonFile(configText, configFile);
  return { tokenizer: hfTokenizer(parseJsonFile(text, file), config, file), file };
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
