/**
 * FON as an installed package: `npm pack` (its prepack builds dist/), the tarball's contents (the
 * compiled modules, their declarations and the WGSL kernels; no tests, fixtures or benches), then
 * in an empty project: `npm install` of the tarball, an import of `fonlm` and `fonlm/node` in plain
 * Node (no tsx) that computes, a TypeScript file type-checked against the package (and a wrong one
 * refused), and `npx fon --help`.
 * Run: node --import tsx --test test/package/pack.test.ts
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const ROOT = join(import.meta.dirname, '../..');
const TSC = createRequire(import.meta.url).resolve('typescript/bin/tsc');

function sh(cmd: string, args: string[], cwd: string, timeout = 300_000) {
  const r = spawnSync(cmd, args, { cwd, encoding: 'utf8', timeout, env: { ...process.env, npm_config_audit: 'false', npm_config_fund: 'false', npm_config_update_notifier: 'false' } });
  return { code: r.status, out: r.stdout ?? '', err: r.stderr ?? '' };
}

test('npm pack, install into an empty project, import in plain Node, type-check against it, npx fon --help', { timeout: 600_000 }, () => {
  const dir = mkdtempSync(join(tmpdir(), 'fon-pack-'));
  try {
    const pack = sh('npm', ['pack', '--json', '--pack-destination', dir], ROOT);
    assert.equal(pack.code, 0, pack.err.slice(-2000));
    const [info] = JSON.parse(pack.out.slice(pack.out.indexOf('['))) as { filename: string; size: number; unpackedSize: number; files: { path: string }[] }[];
    const files = info.files.map((f) => f.path);
    assert.ok(files.includes('dist/index.js') && files.includes('dist/index.d.ts') && files.includes('dist/node.js') && files.includes('bin/fon.js'), 'the compiled entry points and the bin');
    assert.ok(files.some((f) => /^dist\/backend\/webgpu\/kernels\/.+\.wgsl$/.test(f)), 'the WGSL kernels');
    assert.deepEqual(files.filter((f) => /^(src|test|bench|dev|experiments)\//.test(f) || f.endsWith('.ts') && !f.endsWith('.d.ts')), [], 'no sources, tests, fixtures or benches');
    console.log(`tarball ${info.filename}: ${(info.size / 1e6).toFixed(2)} MB packed, ${(info.unpackedSize / 1e6).toFixed(2)} MB unpacked, ${files.length} files`);

    const app = join(dir, 'app');
    sh('mkdir', ['-p', app], dir);
    writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'app', private: true, type: 'module' }));
    const inst = sh('npm', ['install', '--prefer-offline', join(dir, info.filename)], app);
    assert.equal(inst.code, 0, inst.err.slice(-2000));

    // Plain Node: the core computes on the CPU; the Node half loads.
    writeFileSync(join(app, 'use.mjs'), `
      import * as fon from 'fonlm';
      import { loadModel, brownCorpus } from 'fonlm/node';
      await fon.initBackend('cpu');
      const x = fon.tensor([1, 2, 3, 4], [2, 2]);
      console.log(JSON.stringify({ product: Array.from(fon.matmul(x, x).dataSync()), loadModel: typeof loadModel, brown: typeof brownCorpus }));
    `);
    const use = sh(process.execPath, ['use.mjs'], app);
    assert.equal(use.code, 0, use.err);
    assert.deepEqual(JSON.parse(use.out.trim().split('\n').pop()!), { product: [7, 10, 15, 22], loadModel: 'function', brown: 'function' });

    // TypeScript against the package's declarations: a right file passes, a wrong one fails with the type error.
    const tsconfig = { compilerOptions: { strict: true, target: 'ES2022', module: 'NodeNext', moduleResolution: 'NodeNext', noEmit: true, lib: ['ES2022', 'DOM'], types: ['node'], typeRoots: [join(ROOT, 'node_modules/@types')] }, files: ['check.ts'] };
    writeFileSync(join(app, 'tsconfig.json'), JSON.stringify(tsconfig));
    writeFileSync(join(app, 'check.ts'), `
      import * as fon from 'fonlm';
      import { loadModel, type LoadedModel } from 'fonlm/node';
      const t: fon.Tensor = fon.zeros([2, 3]);
      const rows: number = t.shape[0];
      const load: (dir: string, backend: fon.Backend) => Promise<LoadedModel> = loadModel;
      export { rows, load };
    `);
    const good = sh(process.execPath, [TSC, '-p', '.'], app);
    assert.equal(good.code, 0, good.out + good.err);
    writeFileSync(join(app, 'check.ts'), `import * as fon from 'fonlm';\nconst wrong: string = fon.zeros([2]);\nexport { wrong };\n`);
    const bad = sh(process.execPath, [TSC, '-p', '.'], app);
    assert.notEqual(bad.code, 0);
    assert.match(bad.out, /check\.ts\(2,7\): error TS2322: Type 'Tensor' is not assignable to type 'string'/);

    // The bin runs the compiled CLI (no tsx in the project).
    const t0 = performance.now();
    const help = sh('npx', ['--no-install', 'fon', '--help'], app);
    const ms = performance.now() - t0;
    assert.equal(help.code, 0, help.err);
    assert.match(help.out, /^fon — language models whose attention is not quadratic/);
    assert.equal(statSync(join(app, 'node_modules/tsx'), { throwIfNoEntry: false }), undefined, 'tsx is not installed with the package');
    const version = sh('npx', ['--no-install', 'fon', '--version'], app);
    assert.equal(version.out.trim(), JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).version);
    console.log(`npx fon --help: ${ms.toFixed(0)} ms`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
