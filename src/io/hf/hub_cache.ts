/**
 * A model named `org/name` found in the local Hugging Face cache, as transformers lays it out
 * (`$HF_HUB_CACHE`, else `$HF_HOME/hub`, else `~/.cache/huggingface/hub`:
 * `models--org--name/refs/main` holds the commit whose folder is `snapshots/<commit>/`). FON never
 * downloads: a name the cache lacks is a CheckpointError saying where it looked.
 */
import { homedir } from 'node:os';
import { CheckpointError } from '../checkpoint_dir.ts';
import { joinPath, listDir, pathKind, readFileIfExists } from '../../platform/files.ts';

/** Where the cache is: HF_HUB_CACHE, else HF_HOME/hub, else ~/.cache/huggingface/hub. */
export function hubCacheDir(env: Record<string, string | undefined> = process.env): string {
  if (env.HF_HUB_CACHE) return env.HF_HUB_CACHE;
  return joinPath(env.HF_HOME || joinPath(homedir(), '.cache', 'huggingface'), 'hub');
}

/** Whether `id` reads as a Hub model name, org/name (and so may be looked up in the cache). */
export function isHubName(id: string): boolean {
  return /^[A-Za-z0-9][\w.-]*\/[A-Za-z0-9][\w.-]*$/.test(id) && !id.includes('..');
}

/** The cached snapshot folder of model `id` (org/name): refs/main's commit, or the only snapshot there is. */
export async function resolveHubModel(id: string, env: Record<string, string | undefined> = process.env): Promise<string> {
  const [org, name] = id.split('/');
  const repo = joinPath(hubCacheDir(env), `models--${org}--${name}`);
  const hint = `FON never downloads: fetch it first (huggingface-cli download ${id}) or give a folder`;
  if ((await pathKind(repo)) !== 'dir') throw new CheckpointError(`no folder ${id}, and the Hugging Face cache has no ${id} (looked for ${repo}); ${hint}`);
  const ref = await readFileIfExists(joinPath(repo, 'refs', 'main'));
  if (ref !== null) {
    const commit = new TextDecoder().decode(ref).trim();
    const snap = joinPath(repo, 'snapshots', commit);
    if (!/^[\w.-]+$/.test(commit) || (await pathKind(snap)) !== 'dir') throw new CheckpointError(`${joinPath(repo, 'refs', 'main')} names commit ${JSON.stringify(commit)}, but ${snap} is not a folder`);
    return snap;
  }
  const snaps = (await pathKind(joinPath(repo, 'snapshots'))) === 'dir' ? await listDir(joinPath(repo, 'snapshots')) : [];
  if (snaps.length === 1) return joinPath(repo, 'snapshots', snaps[0]);
  throw new CheckpointError(`${repo} has no refs/main and ${snaps.length} snapshots; give the snapshot folder itself`);
}
