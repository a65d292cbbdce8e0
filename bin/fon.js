#!/usr/bin/env node
// The `fon` command. In the installed package it runs the compiled CLI (dist/); in a checkout of
// the sources (src/ beside bin/, tsx installed) it runs the TypeScript through tsx, so that what
// runs is what is edited and no build step stands between an edit and a run.
import { existsSync } from 'node:fs';

const src = new URL('../src/cli/main.ts', import.meta.url);
if (existsSync(src)) {
  const { register } = await import('tsx/esm/api');
  register();
  await import(src.href);
} else {
  await import('../dist/cli/main.js');
}
