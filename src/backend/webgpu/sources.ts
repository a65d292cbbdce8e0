/**
 * Loads the `.wgsl` files under kernels/ once, when the backend starts: with fs in Node and
 * with fetch in a browser (bundlers resolve `new URL(file, import.meta.url)` as assets), so the
 * kernels stay real WGSL files and pipeline creation stays synchronous.
 */
import { DeviceError } from '../../errors.ts';

const sources = new Map<string, string>();

/** Exported for tests. */
export async function loadText(url: URL): Promise<string> {
  let r: Response;
  try {
    if (url.protocol === 'file:') {
      const { readFile } = await import('node:fs/promises');
      return await readFile(url, 'utf8');
    }
    r = await fetch(url);
  } catch (e) {
    throw new DeviceError(`webgpu: cannot load kernel source ${url}: ${(e as Error).message}`);
  }
  if (!r.ok) throw new DeviceError(`webgpu: cannot load kernel source ${url}: HTTP ${r.status}`);
  return r.text();
}

export async function loadSources(names: readonly string[]): Promise<void> {
  await Promise.all(names.filter((n) => !sources.has(n)).map(async (n) => {
    sources.set(n, await loadText(new URL(`./kernels/${n}.wgsl`, import.meta.url)));
  }));
}

/** The text of kernels/NAME.wgsl (loaded by loadSources). */
export function wgslSource(name: string): string {
  const s = sources.get(name);
  if (s === undefined) throw new Error(`webgpu: kernel source '${name}.wgsl' was not loaded (add it to KERNEL_FILES)`);
  return s;
}
