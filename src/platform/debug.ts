/**
 * FON_DEBUG, cumulative levels (STYLE.md §12) on every backend: 1 prints each op (name, backend,
 * shapes) and each WebGPU dispatch; 2 adds each kernel's time (CPU backends: wall time of the call;
 * WebGPU: GPU time from timestamp queries, printed when a submit's timings come back); 3 adds the
 * WGSL of every new pipeline. Read once: the lookup would cost host time on every op otherwise.
 */
import { env } from './env.ts';

let level: number | null = null;

export function debugLevel(): number {
  if (level === null) {
    const n = Number.parseInt(env('FON_DEBUG') ?? '0', 10);
    level = Number.isFinite(n) && n > 0 ? n : 0;
  }
  return level;
}

/** One debug line on stderr (the console's error stream in browsers). */
export function debugLine(s: string): void {
  console.error(s);
}
