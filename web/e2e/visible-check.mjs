// Reads a JSON array of strings on stdin and prints the console's
// visible() of each as a JSON array: internal/console's
// TestVisibleMatchesAudit compares it with audit.Visible.
import * as esbuild from 'esbuild';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const res = await esbuild.build({ entryPoints: [join(here, '..', 'src', 'visible.ts')], bundle: true, format: 'esm', write: false });
const mod = await import('data:text/javascript;base64,' + Buffer.from(res.outputFiles[0].text).toString('base64'));
let input = '';
for await (const chunk of process.stdin) input += chunk;
process.stdout.write(JSON.stringify(JSON.parse(input).map((s) => mod.visible(s))));
