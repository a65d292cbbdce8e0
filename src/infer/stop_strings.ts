/**
 * Stop strings over streamed text. Text pieces (decoded tokens) go in as they come; what cannot be
 * part of a stop string comes straight out, and a tail that might still grow into one is held back
 * until the next piece decides it. When a stop string completes, the text before it is emitted,
 * the stop string itself never is, and the matcher stays stopped.
 *
 * The first stop to complete wins (the one ending earliest in the text; at equal ends the longest),
 * which is what a character-by-character check would see, so the output never depends on how the
 * text was cut into pieces.
 */
import { ArgumentError } from '../errors.ts';

export interface StopStep {
  /** Text that is now certain not to belong to a stop string. */
  emit: string;
  /** True once a stop string has completed; later pushes emit nothing. */
  stopped: boolean;
}

export class StopMatcher {
  private readonly stops: readonly string[];
  /** Length of the longest stop: no tail longer than this minus one is ever held. */
  private readonly maxLength: number;
  /** Text received but not yet emitted: always a prefix of some stop (or empty). */
  private held = '';
  private stoppedOn: string | null = null;

  constructor(stops: string[]) {
    stops.forEach((s, i) => {
      if (typeof s !== 'string' || s.length === 0) throw new ArgumentError(`StopMatcher: stop string ${i} must be a non-empty string, got ${JSON.stringify(s)}`);
    });
    this.stops = [...stops];
    this.maxLength = stops.reduce((m, s) => Math.max(m, s.length), 0);
  }

  /** The stop string that ended the stream, or null while it runs. */
  get matched(): string | null { return this.stoppedOn; }

  /** Feeds the next piece of text; returns what may be shown now and whether a stop completed. */
  push(text: string): StopStep {
    if (this.stoppedOn !== null) return { emit: '', stopped: true };
    const buffer = this.held + text;
    // The stop that completes first: smallest end index, then the longest.
    let bestEnd = Infinity, best: string | null = null, bestStart = 0;
    for (const s of this.stops) {
      const at = buffer.indexOf(s);
      if (at < 0) continue;
      const end = at + s.length;
      if (end < bestEnd || (end === bestEnd && s.length > best!.length)) { bestEnd = end; best = s; bestStart = at; }
    }
    if (best !== null) {
      this.stoppedOn = best;
      this.held = '';
      return { emit: buffer.slice(0, bestStart), stopped: true };
    }
    const keep = this.heldTail(buffer);
    this.held = buffer.slice(buffer.length - keep);
    return { emit: buffer.slice(0, buffer.length - keep), stopped: false };
  }

  /** Ends the stream: returns the held tail (it never completed a stop) and clears it. */
  flush(): string {
    const rest = this.held;
    this.held = '';
    return rest;
  }

  /** Length of the longest suffix of `buffer` that is a proper prefix of some stop string. */
  private heldTail(buffer: string): number {
    for (let k = Math.min(buffer.length, this.maxLength - 1); k > 0; k--) {
      const tail = buffer.slice(buffer.length - k);
      if (this.stops.some((s) => s.startsWith(tail))) return k;
    }
    return 0;
  }
}
