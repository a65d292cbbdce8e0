/**
 * FON's training data: the built-in Brown Corpus, user corpora read from a path, token stores
 * (documents packed with an end-of-text separator, in memory or on disk), and training batches
 * that are a pure function of (seed, step) so that a resumed run sees the same data.
 */
export { brownCorpus, brownDocuments, detokenizeBrown, type BrownDocument } from './brown.ts';
export { readDocuments, DOCUMENT_SEPARATOR_LINE, type ReadDocumentsOptions } from './sources.ts';
export { buildTokenStore, openTokenStore, MemoryTokenStore, FileTokenStore, type TokenStore, type DocumentEncoder, type BuildTokenStoreOptions } from './token_store.ts';
export { BatchSampler, evalWindows, type Batch, type BatchSamplerOptions, type EvalWindow } from './batches.ts';
export { DataError } from './data_error.ts';
export { TokenSlice } from './token_slice.ts';
