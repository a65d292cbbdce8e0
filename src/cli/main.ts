/**
 * The `fon` command line. Each command has --help; errors print as one line without a stack
 * trace and exit non-zero (DESIGN.md, "Conventions").
 */
import { parseArgs } from 'node:util';
import { FonError } from '../errors.ts';
import { UsageError } from './args.ts';
import { initBackend, shutdownBackends, type BackendName } from '../backend/registry.ts';

const USAGE = `fon — language models whose attention is not quadratic

usage: fon <command> [options]

commands:
  train      train a language model (fon train --data builtin:brown --out runs/tiny)
  generate   continue a prompt from a checkpoint (--messages: a conversation, through the model's chat template)
  chat       talk with a chat model (a Hugging Face folder with a chat template), the replies streamed
  serve      OpenAI's API (/v1/completions, /v1/chat/completions, streaming) over a model folder
  eval       perplexity and bits per byte of a checkpoint
  info       parameters, config and KV-cache size of a checkpoint
  tokenize   the token ids of a text (FON checkpoint or Hugging Face tokenizer.json)
  export     write a checkpoint as a Hugging Face folder (fon export --model DIR --out DIR --format hf)
  devices    list the backends that start here and the GPU's features

Benchmarks are scripts of the repository, not of the command: npm run bench -- --help (bench/ops.ts)
and the others in bench/.

Each command takes --help.

options:
  --help, -h                 this text
  --version                  FON's version`;

async function devices(argv: string[]): Promise<void> {
  const { values } = parseArgs({ args: argv, options: { backend: { type: 'string' }, help: { type: 'boolean', short: 'h' } } });
  if (values.help) { console.log('usage: fon devices [--backend cpu|wasm|webgpu]\n\nTries each backend and prints what it found.'); return; }
  await import('./backend_flag.ts'); // registers the wasm and webgpu backends (loaded here, not for every command's --help)
  const names: BackendName[] = values.backend ? [values.backend as BackendName] : ['cpu', 'wasm', 'webgpu'];
  for (const n of names) {
    try {
      const b = await initBackend(n);
      const caps = (b as { caps?: object }).caps;
      console.log(`${n}: ok${caps ? ` ${JSON.stringify(caps)}` : ''}`);
    } catch (e) {
      console.log(`${n}: unavailable (${(e as Error).message})`);
    }
  }
}

async function main(argv: string[]): Promise<number> {
  const [cmd, ...rest] = argv;
  if (!cmd || cmd === '--help' || cmd === '-h' || cmd === 'help') { console.log(USAGE); return 0; }
  if (cmd === '--version') {
    const { default: pkg } = await import('../../package.json', { with: { type: 'json' } });
    console.log(pkg.version);
    return 0;
  }
  // Each command's module is loaded when it runs: `fon --help` and a command's --help load only their own.
  const commands: Record<string, (argv: string[]) => Promise<number>> = {
    train: async (a) => (await import('./train.ts')).trainCommand(a),
    generate: async (a) => (await import('./generate.ts')).generateCommand(a),
    chat: async (a) => (await import('./chat.ts')).chatCommand(a),
    serve: async (a) => (await import('./serve.ts')).serveCommand(a),
    eval: async (a) => (await import('./eval.ts')).evalCommand(a),
    info: async (a) => (await import('./info.ts')).infoCommand(a),
    tokenize: async (a) => (await import('./tokenize.ts')).tokenizeCommand(a),
    export: async (a) => (await import('./export.ts')).exportCommand(a),
    devices: async (a) => { await devices(a); return 0; },
  };
  if (cmd === 'bench') throw new UsageError("there is no 'fon bench': the benchmarks are scripts of FON's repository (npm run bench -- --help runs bench/ops.ts; bench/ holds the others)");
  const run = commands[cmd];
  if (!run) throw new UsageError(`unknown command '${cmd}'; expected one of: ${Object.keys(commands).join(', ')} (fon --help lists them)`);
  return run(rest);
}

try {
  const code = await main(process.argv.slice(2));
  await shutdownBackends();
  process.exit(code);
} catch (e) {
  if (e instanceof FonError) console.error(`fon: ${e.message}`);
  else console.error(e);
  process.exit(e instanceof FonError ? 2 : 1);
}
