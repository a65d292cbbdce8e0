/**
 * Bytes each token id stands for, for bits per byte: the length of its byte-level spelling; the
 * end-of-text separator counts as one byte (the document boundary it marks), other special
 * tokens as none.
 */
import { byteLevelToBytes } from '../io/tokenizer/byte_level.ts';
import type { Tokenizer } from '../io/tokenizer/tokenizer.ts';

export function tokenByteLengths(tok: Tokenizer, vocabSize = tok.vocabSize): Uint32Array {
  const out = new Uint32Array(vocabSize);
  for (let id = 0; id < vocabSize; id++) {
    if (id === tok.eosId) { out[id] = 1; continue; }
    const s = tok.idToToken(id);
    if (s === undefined) continue;
    try {
      out[id] = byteLevelToBytes(s).length;
    } catch {
      out[id] = 0; // an added token that is not a byte-level spelling
    }
  }
  return out;
}
