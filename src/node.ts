/**
 * FON's Node-only API: checkpoints on disk, the built-in Brown Corpus, user corpora from files and
 * token stores. Everything in src/index.ts is here too; the browser imports src/index.ts only.
 */
export * from './index.ts';
export { load } from './io/load.ts';
export { saveCheckpoint, loadModel, loadTrainerState, type TrainerState } from './io/model_checkpoint.ts';
export { writeCheckpointDir, resolveCheckpointDir, CheckpointError } from './io/checkpoint_dir.ts';
export { nodeFolder, openSafetensorsDir, openSafetensorsFile } from './platform/node_folder.ts';
export { loadHfModel, isHfModelDir } from './io/hf/load_dir.ts';
export { brownCorpus, readDocuments, buildTokenStore, openTokenStore, BatchSampler, evalWindows, TokenSlice, DataError, type TokenStore } from './train/data/index.ts';
