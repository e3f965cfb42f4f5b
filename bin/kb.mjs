#!/usr/bin/env node
// Runs the compiled CLI: dist/ is built by `npm install` (postinstall) and `npm run build`.
import { existsSync } from 'node:fs';

const main = new URL('../dist/cli/main.js', import.meta.url);
if (!existsSync(main)) {
  process.stderr.write('kb: dist/ is missing: run `npm run build` (npm install runs it)\n');
  process.exit(1);
}
await import(main.href);
