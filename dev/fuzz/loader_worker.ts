/** The worker thread that makes and loads fuzz cases (dev/fuzz/loader_fuzz.ts), so a hang or an out-of-memory can be stopped from outside. */
import { parentPort } from 'node:worker_threads';
import { makeCase, runCase, type Bases } from './loader_cases.ts';

interface Job { seed: number; index: number; bases: Bases; scratch: string }

parentPort!.on('message', async (job: Job) => {
  const started = performance.now();
  let description = `case ${job.index}`;
  try {
    const c = makeCase(job.seed, job.index, job.bases, job.scratch);
    description = c.description;
    const outcome = await runCase(c);
    parentPort!.postMessage({ index: job.index, description, outcome, ms: performance.now() - started });
  } catch (e) {
    parentPort!.postMessage({ index: job.index, description, outcome: { kind: 'other error', name: 'harness', message: String((e as Error)?.stack ?? e) }, ms: performance.now() - started });
  }
});
