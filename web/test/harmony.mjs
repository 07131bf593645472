// The `harmony` binary and a `harmony serve` child for the browser tests (browser.test.mjs,
// dashboard.test.mjs).
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/** HARMONY_BIN, else target/release/harmony, else target/debug/harmony. */
export function harmonyBin() {
  const c = [process.env.HARMONY_BIN, 'target/release/harmony', 'target/debug/harmony'].filter(Boolean)
    .map((p) => path.resolve(repo, p));
  const found = c.find((p) => fs.existsSync(p));
  if (!found) throw new Error(`no harmony binary (tried ${c.join(', ')}): cargo build -p harmony-cli`);
  return found;
}

/**
 * `harmony serve` on SQLite in `dir`, on a free loopback port, with `env` added to the
 * environment (its token) and `args` to its options: `{child, url}`, `url` resolving to the base URL from its "listening"
 * line (rejected if it exits or has not started in 30 s).
 */
export function startHarmony(dir, env, args = []) {
  const child = spawn(harmonyBin(), ['serve', '--db', `sqlite://${dir}/h.db`, '--listen', '127.0.0.1:0', ...args],
    { env: { ...process.env, ...env }, stdio: ['ignore', 'ignore', 'pipe'] });
  const url = new Promise((resolve, reject) => {
    let err = '';
    const timer = setTimeout(() => reject(new Error(`harmony serve did not start in 30 s: ${err}`)), 30000);
    child.stderr.on('data', (d) => {
      err += d;
      const m = /listening on (http:\/\/[0-9.:]+)/.exec(err);
      if (m) { clearTimeout(timer); resolve(m[1]); }
    });
    child.on('exit', (code) => { clearTimeout(timer); reject(new Error(`harmony serve exited ${code}: ${err}`)); });
  });
  return { child, url };
}
