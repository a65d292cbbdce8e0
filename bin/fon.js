#!/usr/bin/env node
// The `fon` command. In the installed package it runs the compiled CLI (dist/); in a checkout of
// the sources (src/ beside bin/, tsx installed) it runs the TypeScript through tsx, so that what
// runs is what is edited and no build step stands between an edit and a run. A checkout without
// its dev dependencies runs dist/ when it has been built (npm run build).
import { existsSync } from 'node:fs';

const src = new URL('../src/cli/main.ts', import.meta.url);
const dist = new URL('../dist/cli/main.js', import.meta.url);
let tsx = null;
if (existsSync(src)) tsx = await import('tsx/esm/api').catch(() => null);
if (tsx) {
  tsx.register();
  await import(src.href);
} else if (existsSync(dist)) {
  await import(dist.href);
} else {
  console.error('fon: this checkout has neither tsx (npm ci installs it) nor a build (npm run build)');
  process.exit(2);
}
