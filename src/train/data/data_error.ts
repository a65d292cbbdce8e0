import { FonError } from '../../errors.ts';

/**
 * Training data that cannot be used: a corpus path that does not exist or holds no text, a JSONL
 * line that is not an object with a string `text` field, a token store too short for one window.
 * The message names the path (and line) and says what was expected. It lives here until
 * src/errors.ts takes it in beside the other FonError kinds.
 */
export class DataError extends FonError {}
