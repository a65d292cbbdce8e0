/**
 * The training data of `fon train --data`: the built-in Brown Corpus (split by document,
 * train/data/brown.ts) or a user path (train/data/sources.ts). A user corpus is held out by tokens:
 * the last 5% of its token stream (at least two windows) is the validation split, since a single
 * text file is a single document. A user corpus is named by its absolute path, so a resumed run
 * finds it from any working directory.
 */
import { resolve } from 'node:path';
import type { Tokenizer } from '../io/tokenizer/tokenizer.ts';
import { brownCorpus, buildTokenStore, DataError, readDocuments, TokenSlice, type TokenStore } from '../train/data/index.ts';
import { Progress } from './progress.ts';

export interface Corpus {
  readonly name: string;
  /** Training text for fitting a BPE (at most ~64 MB of a user corpus). */
  sampleForTokenizer(): Promise<string[]>;
  tokenStores(tok: Tokenizer, context: number): Promise<{ train: TokenStore; validation: TokenStore }>;
}

const HELD_OUT = 0.05;
const TOKENIZER_SAMPLE_CHARS = 64 << 20;

function brown(): Corpus {
  return {
    name: 'builtin:brown',
    sampleForTokenizer: async () => brownCorpus().train,
    tokenStores: async (tok) => {
      const { train, validation } = brownCorpus();
      return { train: await buildTokenStore(train, tok), validation: await buildTokenStore(validation, tok) };
    },
  };
}

function userPath(path: string): Corpus {
  return {
    name: resolve(path),
    sampleForTokenizer: async () => {
      const out: string[] = [];
      let chars = 0, whole = true;
      for await (const d of readDocuments(path)) {
        out.push(d);
        chars += d.length;
        if (chars >= TOKENIZER_SAMPLE_CHARS) { whole = false; break; }
      }
      // When the sample is the whole corpus, leave out its last 10% of text, which holds the
      // validation tail (the last 5% of tokens), so the tokenizer never sees validation text.
      return whole ? cutTail(out, Math.floor(chars * (1 - 2 * HELD_OUT))) : out;
    },
    tokenStores: async (tok, context) => {
      const bar = new Progress({ label: 'tokenize', unit: 'tok' });
      const all = await buildTokenStore(readDocuments(path), tok, { onProgress: (_d, n) => bar.update(n) });
      bar.finish();
      const held = Math.max(Math.ceil(all.length * HELD_OUT), 2 * context + 1);
      if (all.length - held < context + 1) {
        all.close();
        throw new DataError(`corpus ${path} has ${all.length} tokens; at least ${held + context + 1} are needed for training windows of ${context} tokens plus a validation tail of ${held}`);
      }
      const train = new TokenSlice(all, 0, all.length - held);
      const validation = new TokenSlice(all, all.length - held, held);
      train.close = () => all.close();
      return { train, validation };
    },
  };
}

/** The first `keep` characters of a list of documents. */
function cutTail(docs: string[], keep: number): string[] {
  const out: string[] = [];
  for (const d of docs) {
    if (keep <= 0) break;
    out.push(d.length <= keep ? d : d.slice(0, keep));
    keep -= d.length;
  }
  return out;
}

/** `builtin:brown` or a path. */
export async function loadCorpus(spec: string): Promise<Corpus> {
  if (spec === 'builtin:brown') return brown();
  if (spec.startsWith('builtin:')) throw new DataError(`unknown built-in corpus '${spec}'; expected builtin:brown or a path`);
  return userPath(spec);
}
