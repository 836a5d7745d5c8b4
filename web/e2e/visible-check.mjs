// Reads a JSON array of strings on stdin and prints, as a JSON object, the
// console's visible(), escaped() and escapedJSON() of each:
// internal/console's TestVisibleMatchesAudit compares them with
// audit.Visible, audit.Escape and audit.JSONLine.
import * as esbuild from 'esbuild';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const res = await esbuild.build({ entryPoints: [join(here, '..', 'src', 'visible.ts')], bundle: true, format: 'esm', write: false });
const mod = await import('data:text/javascript;base64,' + Buffer.from(res.outputFiles[0].text).toString('base64'));
let input = '';
for await (const chunk of process.stdin) input += chunk;
const cases = JSON.parse(input);
process.stdout.write(JSON.stringify({
  visible: cases.map((s) => mod.visible(s)),
  escaped: cases.map((s) => mod.escaped(s)),
  json: cases.map((s) => mod.escapedJSON(s)),
}));
