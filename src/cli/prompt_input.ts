/**
 * Where `fon generate` takes its prompt: `--prompt TEXT`, `--prompt -` (all of standard input, so a
 * prompt with real newlines can be piped in) or `--prompt-file FILE` (UTF-8). Exactly one.
 */
import { onPathSync } from '../platform/files.ts';
import { readFileSync } from 'node:fs';
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
