// Builds the console into ../internal/console/dist, which the Go build
// embeds (internal/console). Everything the pages load comes from there:
// no CDN at run time.
import * as esbuild from 'esbuild';
import { cpSync, mkdirSync, rmSync, writeFileSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const out = join(here, '..', 'internal', 'console', 'dist');
const assets = join(out, 'assets');

rmSync(assets, { recursive: true, force: true });
for (const f of ['index.html', 'vnc.html']) rmSync(join(out, f), { force: true });
mkdirSync(assets, { recursive: true });

await esbuild.build({
  entryPoints: { app: join(here, 'src', 'main.ts'), vnc: join(here, 'src', 'vnc.ts') },
  bundle: true,
  format: 'esm',
  target: ['es2022'],
  minify: true,
  sourcemap: false,
  legalComments: 'linked',
  outdir: assets,
  logLevel: 'warning',
});
cpSync(join(here, 'node_modules', '@xterm', 'xterm', 'css', 'xterm.css'), join(assets, 'xterm.css'));
cpSync(join(here, 'src', 'app.css'), join(assets, 'app.css'));
// noVNC is MPL-2.0: its licence (which names where its source is) ships beside the bundle.
cpSync(join(here, 'node_modules', '@novnc', 'novnc', 'LICENSE.txt'), join(assets, 'novnc-LICENSE.txt'));
for (const f of ['index.html', 'vnc.html']) {
  writeFileSync(join(out, f), readFileSync(join(here, 'src', f)));
}
console.log('console built into', out);
