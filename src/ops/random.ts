/**
 * Seeded random numbers that are the same on every backend: values are made on the host by a
 * counter-based generator (element i of seed s is a pure function of (s, i)) and uploaded, so a
 * tensor's values never depend on the backend, the thread count or the order of creation.
 */

/** A 32-bit integer hash (lowbias32 by Chris Wellons' search), mixed with the seed. */
function hash32(x: number): number {
  x ^= x >>> 16; x = Math.imul(x, 0x21f0aaad);
  x ^= x >>> 15; x = Math.imul(x, 0x735a2d97);
  x ^= x >>> 15;
  return x >>> 0;
}

/** Uniform in [0, 1) with 24 random bits, for element `i` of stream `seed`. */
export function uniformAt(seed: number, i: number): number {
  const h = hash32(hash32(i ^ Math.imul(seed | 0, 0x9e3779b9)) ^ (seed >>> 0) ^ Math.floor(i / 4294967296));
  return (h >>> 8) / 16777216;
}

export function uniformArray(seed: number, n: number, low = 0, high = 1): Float32Array {
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) out[i] = low + (high - low) * uniformAt(seed, i);
  return out;
}

/** Standard normals by Box–Muller on pairs of uniforms. */
export function normalArray(seed: number, n: number, mean = 0, std = 1): Float32Array {
  const out = new Float32Array(n);
  for (let i = 0; i < n; i += 2) {
    const u1 = 1 - uniformAt(seed, i);
    const u2 = uniformAt(seed, i + 1);
    const r = Math.sqrt(-2 * Math.log(u1));
    out[i] = mean + std * r * Math.cos(2 * Math.PI * u2);
    if (i + 1 < n) out[i + 1] = mean + std * r * Math.sin(2 * Math.PI * u2);
  }
  return out;
}

let globalSeed = 0x5eed;
let draws = 0;

/** Sets the stream unseeded creation draws from. */
export function manualSeed(seed: number): void { globalSeed = seed >>> 0; draws = 0; }

/** The next seed for a creation call that gave none: deterministic after `manualSeed`. */
export function nextSeed(): number { return hash32(globalSeed ^ Math.imul(++draws, 0x85ebca6b)); }

/** Successive uniforms of stream `seed` as a function (for host-side test data and sampling). */
export function uniformStream(seed: number): () => number {
  let i = 0;
  return () => uniformAt(seed, i++);
}
