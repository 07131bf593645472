// Harmony's device SDK for browsers: an ES module over the wasm bundle (./pkg/, built from
// crates/harmony-wasm by web/build.sh). The policy check, the randomizers, the ledger and the
// budget run in WebAssembly (harmony-client, compiled); this file fetches, retries and persists.
import init, { Collection, DeviceState, checkConfig } from './pkg/harmony_wasm.js';

export { Collection, DeviceState, checkConfig };

let ready = null;

/** Loads the wasm module once (from ./pkg/ next to this file unless `wasmUrl` is given). */
export function initHarmony(wasmUrl) {
  ready ??= init(wasmUrl === undefined ? undefined : { module_or_path: wasmUrl });
  return ready;
}

/** An error from the server (4xx: `status`, `field`) or after every retry (`status` 0 or 5xx). */
export class HarmonyHttpError extends Error {
  constructor(message, { status = 0, field = '', url = '' } = {}) {
    super(message);
    this.name = 'HarmonyHttpError';
    Object.assign(this, { status, field, url });
  }
}

/** A Storage-like object in memory (tests, simulated devices, pages without localStorage). */
export function memoryStorage() {
  const m = new Map();
  return {
    getItem: (k) => (m.has(k) ? m.get(k) : null),
    setItem: (k, v) => void m.set(k, String(v)),
    removeItem: (k) => void m.delete(k),
  };
}

/**
 * A storage in IndexedDB (the default where the browser has it): its reads see every write
 * committed by any tab of the origin. localStorage does not promise that: Chromium propagates a
 * tab's writes to the other tabs' renderers asynchronously, so a second tab holding the Web Lock
 * right after the first could still read the state from before the first tab's report. Async:
 * `getItemAsync` / `setItemAsync` (a write resolves once its transaction has committed).
 */
export function indexedDbStorage(name = 'harmony-device') {
  let db = null;
  const open = () => new Promise((resolve, reject) => {
    const r = indexedDB.open(name, 1);
    r.onupgradeneeded = () => r.result.createObjectStore('state');
    r.onsuccess = () => resolve(r.result);
    r.onerror = () => reject(r.error);
  });
  const run = async (mode, op) => {
    db ??= await open();
    return new Promise((resolve, reject) => {
      const tx = db.transaction('state', mode);
      const req = op(tx.objectStore('state'));
      tx.oncomplete = () => resolve(req.result);
      tx.onerror = tx.onabort = () => reject(tx.error);
    });
  };
  return {
    getItemAsync: async (k) => (await run('readonly', (s) => s.get(k))) ?? null,
    setItemAsync: async (k, v) => { await run('readwrite', (s) => s.put(String(v), k)); },
  };
}

const defaultStorage = () =>
  (globalThis.indexedDB ? indexedDbStorage() : globalThis.localStorage);

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const RETRY = { attempts: 6, baseMs: 100, maxMs: 5000, maxRetryAfterMs: 30000, timeoutMs: 60000 };

export class HarmonyDevice {
  /**
   * @param {object} o
   * @param {string} [o.server] the server's base URL ('' : this page's origin)
   * @param {object|null} [o.policy] the app's policy (never the server's): max_epsilon, approximate, max_delta, tasks, mechanisms, budget
   * @param {Storage} [o.storage] where the ledger and budget persist (default IndexedDB, else
   *   localStorage; or a `Storage` such as `memoryStorage()`)
   * @param {string} [o.storageKey]
   * @param {object} [o.retry] attempts, baseMs, maxMs, maxRetryAfterMs, timeoutMs
   * @param {typeof fetch} [o.fetch]
   */
  constructor({ server = '', policy = null, storage = defaultStorage(), storageKey = 'harmony-device',
    retry = {}, fetch: fetchFn = (...a) => globalThis.fetch(...a) } = {}) {
    if (!storage) throw new TypeError('HarmonyDevice: no storage (pass one, e.g. memoryStorage())');
    this.server = server.replace(/\/+$/, '');
    this.policy = policy === null ? '' : JSON.stringify(policy);
    this.storage = storage;
    this.key = storageKey;
    this.retry = { ...RETRY, ...retry };
    this.fetch = fetchFn;
    this.queue = Promise.resolve();
  }

  /** (async) The persisted state: `{ledger: {collection: entry}, spends: [{collection, epsilon, delta?, at}],
   * series?: {key: {collections, epoch, report}}}`. */
  async state() {
    return JSON.parse((await this.#read()) || '{}');
  }

  async #read() {
    const s = this.storage;
    return s.getItemAsync ? s.getItemAsync(this.key) : s.getItem(this.key);
  }

  async #write(text) {
    const s = this.storage;
    return s.setItemAsync ? s.setItemAsync(this.key, text) : s.setItem(this.key, text);
  }

  /**
   * Reports `record` to a collection once: fetches the config, checks it against the policy and
   * the budget, randomizes in wasm, records the report (and its ε) in storage, then POSTs it with
   * retries. A later call after a failure resends the same bytes under the same report id; after
   * an acknowledgement it throws "this device already reported to collection …".
   * Calls on one device run one after another.
   * @returns {Promise<{reportId: string, accepted: number, duplicates: number}>}
   */
  contribute(collectionId, record) {
    const run = this.queue.then(() => this.#contribute(collectionId, record));
    this.queue = run.catch(() => {});
    return run;
  }

  async #contribute(id, record) {
    await initHarmony();
    const path = `/v1/collections/${encodeURIComponent(id)}`;
    const config = await this.#request('GET', `${path}/config`);
    const collection = new Collection(config, this.policy, id);
    let item, version;
    try {
      version = collection.configVersion;
      item = await this.#withState((d) => JSON.parse(d.prepare(collection, JSON.stringify(record), Date.now() / 1000)).item);
    } finally {
      collection.free();
    }
    const body = JSON.stringify({ collection: id, config_version: version, reports: [item] });
    const ack = JSON.parse(await this.#request('POST', `${path}/reports`, body));
    await this.#withState((d) => d.acknowledge(id));
    return { reportId: item.id, accepted: ack.accepted, duplicates: ack.duplicates };
  }

  /** Runs `f` on the device state read from storage and writes the state back before returning,
   * holding a Web Lock named after the storage key (where the browser has Web Locks): two tabs of
   * one origin never both read the state before either has written it (one report per
   * collection, one budget); with the default IndexedDB storage the second tab's read sees the
   * first tab's committed write. */
  #withState(f) {
    const run = async () => {
      const device = new DeviceState((await this.#read()) || '');
      try {
        const out = f(device);
        await this.#write(device.state());
        return out;
      } finally {
        device.free();
      }
    };
    const locks = globalThis.navigator?.locks;
    return locks ? locks.request(`harmony-device:${this.key}`, run) : Promise.resolve().then(run);
  }

  /** One request with retries: network errors, 5xx and 429 back off (full jitter, or the
   * server's Retry-After); other 4xx throw at once with the server's field and message. */
  async #request(method, path, body) {
    const url = this.server + path;
    const r = this.retry;
    const backoff = (attempt) => Math.random() * Math.min(r.maxMs, r.baseMs * 2 ** attempt);
    let last = '';
    let wait = 0;
    for (let attempt = 0; attempt < r.attempts; attempt++) {
      if (attempt > 0) await sleep(wait);
      let res;
      try {
        res = await this.fetch(url, {
          method, body, cache: 'no-store',
          headers: body === undefined ? {} : { 'Content-Type': 'application/json' },
          signal: AbortSignal.timeout(r.timeoutMs),
        });
      } catch (e) {
        last = String(e);
        wait = backoff(attempt);
        continue;
      }
      const text = await res.text();
      if (res.ok) return text;
      if (res.status >= 500 || res.status === 429) {
        last = `${res.status} ${text}`;
        const after = Number(res.headers.get('Retry-After'));
        wait = Number.isFinite(after) && after > 0 ? Math.min(after * 1000, r.maxRetryAfterMs) : backoff(attempt);
        continue;
      }
      let field = '', message = text;
      try { ({ field, message } = JSON.parse(text).error); } catch { /* not the server's JSON */ }
      throw new HarmonyHttpError(`server rejected the request (${res.status}): ${field}: ${message}`,
        { status: res.status, field, url });
    }
    throw new HarmonyHttpError(`request to ${url} failed after ${r.attempts} attempts: ${last}`, { url });
  }
}
