/**
 * Picks the kernels' forms a Spot step runs fastest with, from a bench/spot.ts --json file whose
 * rows ran several --forms sets at one length (dev/gpu_pending.sh `short` then times the decode table
 * with them): each form whose step, on the GPU alone, beat the default's by more than 1% (of the
 * matmulMany geometries the fastest), joined into one set; `default` where none did. Prints the set.
 *
 *   node --import tsx dev/pick_forms.ts spot_forms.json
 */
import { readFileSync } from 'node:fs';

interface Row { forms: string; stepGpuMs?: number; stepMs: number }
const rows = (JSON.parse(readFileSync(process.argv[2], 'utf8')) as { rows: Row[] }).rows;
const time = (r: Row) => r.stepGpuMs ?? r.stepMs;
const base = rows.find((r) => r.forms === 'default');
if (!base) throw new Error(`${process.argv[2]}: no row of the default forms`);
const better = rows.filter((r) => r.forms !== 'default' && !r.forms.includes(',') && time(r) < 0.99 * time(base));
const many = better.filter((r) => r.forms.startsWith('many:')).sort((a, b) => time(a) - time(b))[0];
const picked = [...(many ? [many.forms] : []), ...better.filter((r) => !r.forms.startsWith('many:')).map((r) => r.forms)];
for (const r of rows) console.error(`${r.forms}: step ${r.stepMs.toFixed(4)} ms, GPU alone ${r.stepGpuMs?.toFixed(4) ?? '—'} ms`);
console.log(picked.length ? picked.join(',') : 'default');
