// After `tsc -p tsconfig.build.json`: copies what src loads at run time besides its modules (the
// WebGPU kernels' .wgsl files, read relative to the module that loads them) into dist/.
import { cpSync, readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../../', import.meta.url));
let n = 0;
function walk(dir) {
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) walk(p);
    else if (name.endsWith('.wgsl')) {
      cpSync(p, join(root, 'dist', relative(join(root, 'src'), p)));
      n++;
    }
  }
}
walk(join(root, 'src'));
console.log(`copied ${n} .wgsl files into dist/`);
