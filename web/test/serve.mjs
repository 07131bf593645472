// A tiny static server on loopback for the browser test: serves web/ (the SDK and the test
// page) and the vectors-only test bundle (target/wasm-vectors/ at /vectors/), and proxies /v1/
// to `harmony serve`, so the page, the bundle and the API share one origin (no CORS).
// `failFirstPosts`: the first N report POSTs are answered 503 with Retry-After: 1 (the SDK
// must wait and resend the same bytes).
import http from 'node:http';
import fs from 'node:fs';
import path from 'node:path';

// Forwarded requests go straight to harmony serve, whatever proxy the environment names (loopback.mjs).
const agent = new http.Agent({ keepAlive: false });

const TYPES = { '.html': 'text/html', '.js': 'text/javascript', '.mjs': 'text/javascript', '.json': 'application/json',
  '.wasm': 'application/wasm', '.css': 'text/css', '.ts': 'text/plain' };

export function startStatic({ roots, api, failFirstPosts = 0 }) {
  const stats = { posts503: 0, bodies: [] };
  const server = http.createServer((req, res) => {
    const url = new URL(req.url, 'http://x');
    if (url.pathname.startsWith('/v1/')) return proxy(req, res, url, api, stats, failFirstPosts);
    for (const [prefix, dir] of roots) {
      if (!url.pathname.startsWith(prefix)) continue;
      const file = path.join(dir, path.normalize(decodeURIComponent(url.pathname.slice(prefix.length))));
      if (!file.startsWith(dir) || !fs.existsSync(file) || !fs.statSync(file).isFile()) break;
      // Cross-origin isolated (COOP + COEP): performance.now() then has 5 µs resolution, not 100 µs.
      res.writeHead(200, { 'Content-Type': TYPES[path.extname(file)] ?? 'application/octet-stream', 'Cache-Control': 'no-store',
        'Cross-Origin-Opener-Policy': 'same-origin', 'Cross-Origin-Embedder-Policy': 'require-corp' });
      return fs.createReadStream(file).pipe(res);
    }
    res.writeHead(404).end('not found');
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve({ server, stats,
    base: `http://127.0.0.1:${server.address().port}` })));
}

function proxy(req, res, url, api, stats, failFirstPosts) {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const body = Buffer.concat(chunks);
    if (req.method === 'POST' && url.pathname.endsWith('/reports')) {
      stats.bodies.push(body.toString());
      if (stats.posts503 < failFirstPosts) {
        stats.posts503++;
        res.writeHead(503, { 'Content-Type': 'application/json', 'Retry-After': '1' });
        return res.end('{"error":{"field":"server","message":"busy (test)"}}');
      }
    }
    const headers = { ...req.headers, host: new URL(api).host };
    const up = http.request(api + url.pathname + url.search, { method: req.method, headers, agent }, (r) => {
      res.writeHead(r.statusCode, r.headers);
      r.pipe(res);
    });
    up.on('error', (e) => res.writeHead(502).end(String(e)));
    up.end(body);
  });
}
