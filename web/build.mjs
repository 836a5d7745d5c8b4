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
for (const f of ['index.html', 'vnc.html', 'docs.html']) rmSync(join(out, f), { force: true });
mkdirSync(assets, { recursive: true });

await esbuild.build({
  entryPoints: { app: join(here, 'src', 'main.ts'), vnc: join(here, 'src', 'vnc.ts'), docs: join(here, 'src', 'docs.ts') },
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
cpSync(join(here, 'src', 'docs.css'), join(assets, 'docs.css'));
// /docs: Redoc's standalone bundle (MIT), with its licence notices.
// One change to it: the footer's Redocly logo is fetched from a CDN; it is
// pointed at an empty data: URL, so the page asks nothing of another host
// (its CSP would block the request anyway). The build fails if the bundle
// no longer has exactly that one URL.
{
  const logo = 'https://cdn.redoc.ly/redoc/logo-mini.svg';
  const src = readFileSync(join(here, 'node_modules', 'redoc', 'bundles', 'redoc.standalone.js'), 'utf8');
  if (src.split(logo).length !== 2 || /https:\/\/cdn\./.test(src.replace(logo, ''))) throw new Error('redoc.standalone.js: expected exactly one CDN URL, the logo');
  writeFileSync(join(assets, 'redoc.standalone.js'), src.replace(logo, 'data:,'));
}
cpSync(join(here, 'node_modules', 'redoc', 'bundles', 'redoc.standalone.js.LICENSE.txt'), join(assets, 'redoc.standalone.js.LICENSE.txt'));
cpSync(join(here, 'node_modules', 'redoc', 'LICENSE'), join(assets, 'redoc-LICENSE.txt'));
// noVNC is MPL-2.0: its licence (which names where its source is) ships beside the bundle.
cpSync(join(here, 'node_modules', '@novnc', 'novnc', 'LICENSE.txt'), join(assets, 'novnc-LICENSE.txt'));
for (const f of ['index.html', 'vnc.html', 'docs.html']) {
  writeFileSync(join(out, f), readFileSync(join(here, 'src', f)));
}
console.log('console built into', out);
