// Copies the dashboard's charting library (Vega, Vega-Lite, vega-embed: the versions pinned in
// package.json / package-lock.json) from node_modules into web/dashboard/vendor/ with their
// licences. `node vendor.mjs --check` (CI's browser stage, after `npm ci`) fails when the
// committed copies differ from node_modules'. harmony serve embeds the copies (no Node at run time).
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const out = path.join(here, 'dashboard/vendor');
const FILES = [
  ['vega/build/vega.min.js', 'vega.min.js'],
  ['vega-lite/build/vega-lite.min.js', 'vega-lite.min.js'],
  ['vega-embed/build/vega-embed.min.js', 'vega-embed.min.js'],
  ['vega/LICENSE', 'LICENSE-vega'],
  ['vega-lite/LICENSE', 'LICENSE-vega-lite'],
  ['vega-embed/LICENSE', 'LICENSE-vega-embed'],
];
const check = process.argv.includes('--check');
const pinned = JSON.parse(fs.readFileSync(path.join(here, 'package.json'), 'utf8')).devDependencies;
let bad = 0;
for (const pkg of ['vega', 'vega-lite', 'vega-embed']) {
  const v = JSON.parse(fs.readFileSync(path.join(here, 'node_modules', pkg, 'package.json'), 'utf8')).version;
  if (v !== pinned[pkg]) { console.error(`${pkg}: node_modules has ${v}, package.json pins ${pinned[pkg]}`); bad++; }
}
fs.mkdirSync(out, { recursive: true });
for (const [from, to] of FILES) {
  const src = fs.readFileSync(path.join(here, 'node_modules', from));
  const dst = path.join(out, to);
  if (check) {
    if (!fs.existsSync(dst) || !src.equals(fs.readFileSync(dst))) { console.error(`web/dashboard/vendor/${to} differs from node_modules/${from}: run node web/vendor.mjs and commit`); bad++; }
  } else {
    fs.writeFileSync(dst, src);
  }
}
const extra = fs.readdirSync(out).filter((f) => !FILES.some(([, to]) => to === f));
if (extra.length) { console.error(`unexpected files in web/dashboard/vendor: ${extra.join(', ')}`); bad++; }
if (bad) process.exit(1);
console.log(check ? 'vendor: web/dashboard/vendor equals node_modules' : `vendor: ${FILES.length} files written to web/dashboard/vendor`);
