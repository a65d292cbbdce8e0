/**
 * Where `fon generate` takes its prompt: `--prompt TEXT`, `--prompt -` (all of standard input, so a
 * prompt with real newlines can be piped in), `--prompt-file FILE` (UTF-8), or `--messages FILE`
 * (a JSON list of {role, content} rendered by the model's chat template). Exactly one.
 */
import { onPathSync } from '../platform/files.ts';
import { readFileSync } from 'node:fs';
import { parseJson } from '../io/json.ts';
import { ConfigError } from '../errors.ts';
import { parseMessages, type ChatMessage, type ChatTemplate } from '../io/hf/chat_template.ts';
import { UsageError } from './args.ts';

/** The prompt the flags name, read whole (the file's or standard input's bytes as UTF-8). */
export async function readPrompt(command: string, prompt: string | undefined, file: string | undefined, stdin: AsyncIterable<Buffer | string> = process.stdin): Promise<string> {
  if (prompt !== undefined && file !== undefined) throw new UsageError(`${command}: --prompt and --prompt-file exclude each other; give one`);
  if (file !== undefined) {
    if (file === '') throw new UsageError(`${command}: --prompt-file needs a file name`);
    return onPathSync(file, 'cannot read the prompt file', () => readFileSync(file, 'utf8'));
  }
  if (prompt === undefined) throw new UsageError(`${command}: --prompt TEXT, --prompt - (standard input) or --prompt-file FILE is required (fon ${command} --help)`);
  if (prompt !== '-') return prompt;
  const parts: Buffer[] = [];
  for await (const chunk of stdin) parts.push(typeof chunk === 'string' ? Buffer.from(chunk) : chunk);
  return Buffer.concat(parts).toString('utf8');
}

/** The conversation in a --messages file: a JSON list of {role, content}; errors name the file and the entry. */
export function readMessages(file: string): ChatMessage[] {
  const text = onPathSync(file, 'cannot read the messages file', () => readFileSync(file, 'utf8'));
  return parseMessages(parseJson(text, (why) => new ConfigError(`${file}: ${why}`)), file);
}

/** The prompt a model's chat template makes of `messages` (the assistant's turn opened); a model without one is refused by name. */
export function chatPrompt(command: string, dir: string, template: ChatTemplate | null | undefined, messages: readonly ChatMessage[]): string {
  if (!template) throw new UsageError(`${command}: the model in ${dir} has no chat template (chat_template.jinja, or chat_template in tokenizer_config.json); give a --prompt instead`);
  return template.render(messages);
}
