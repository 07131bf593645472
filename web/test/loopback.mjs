// HTTP from the tests to their own servers on loopback, never through a proxy. Node's fetch
// takes whatever dispatcher the environment installs (a proxy agent from NODE_OPTIONS, or
// Node ≥ 24's NODE_USE_ENV_PROXY with HTTP_PROXY), and a CI run once had the test's POST to
// 127.0.0.1 answered by such a proxy ("403 resolve_deny: denied destination"). These requests
// go through node:http with an agent of their own, which no environment setting reaches.
import http from 'node:http';

const agent = new http.Agent({ keepAlive: false });
const LOOPBACK = new Set(['127.0.0.1', 'localhost', '[::1]']);

/**
 * One request to a loopback URL: resolves `{status, ok, headers, text}` (rejects on a refused
 * connection, or when no answer came in `timeoutMs`). `body`: a string or a Buffer.
 */
export function loopback(url, { method = 'GET', headers = {}, body, timeoutMs = 30000 } = {}) {
  const u = new URL(url);
  if (!LOOPBACK.has(u.hostname)) throw new Error(`not a loopback URL: ${url}`);
  return new Promise((resolve, reject) => {
    const req = http.request(u, { method, headers, agent, timeout: timeoutMs }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('error', reject);
      res.on('end', () => resolve({ status: res.statusCode, ok: res.statusCode >= 200 && res.statusCode < 300,
        headers: res.headers, text: Buffer.concat(chunks).toString('utf8') }));
    });
    req.on('timeout', () => req.destroy(new Error(`${method} ${url}: no answer in ${timeoutMs} ms`)));
    req.on('error', reject);
    req.end(body);
  });
}

/** `loopback` for the HTTP API's requests: a JSON body and a bearer token. */
export function apiRequest(base, method, p, body, token) {
  return loopback(base + p, { method,
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body) });
}

/** Playwright's launch flags for Debian's chromium here (headless, no proxy, no network of its own). */
export const CHROMIUM_ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
  '--disable-component-update', '--disable-sync', '--no-first-run', '--no-proxy-server'];
