// The dashboard's calls to harmony serve (same origin): the bearer token from sessionStorage on
// every call, the server's JSON errors ({"error": {field, message}}) as ApiError.
const KEY = 'harmony-dashboard-token';

export const token = {
  get: () => sessionStorage.getItem(KEY) || '',
  set: (t) => sessionStorage.setItem(KEY, t),
  clear: () => sessionStorage.removeItem(KEY),
};

/** A refused or failed call: `status` (0: no answer), the server's `field` and `message`. */
export class ApiError extends Error {
  constructor(status, field, message) {
    super(field ? `${field}: ${message}` : message);
    Object.assign(this, { status, field, serverMessage: message });
  }
}

/** One call; resolves to the parsed JSON body (or text for non-JSON answers). */
export async function call(method, path, body, { bearer = token.get(), timeoutMs = 30000 } = {}) {
  const headers = {};
  if (bearer) headers.Authorization = `Bearer ${bearer}`;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  let res;
  try {
    res = await fetch(path, { method, headers, cache: 'no-store', signal: AbortSignal.timeout(timeoutMs),
      body: body === undefined ? undefined : JSON.stringify(body) });
  } catch (e) {
    throw new ApiError(0, '', `the server did not answer (${e.name})`);
  }
  const text = await res.text();
  let json;
  try { json = JSON.parse(text); } catch { json = undefined; }
  if (!res.ok) {
    const err = json?.error;
    throw new ApiError(res.status, err?.field ?? '', err?.message ?? (text || res.statusText));
  }
  return json ?? text;
}

export const listCollections = (opts) => call('GET', '/v1/collections', undefined, opts);
export const createCollection = (body) => call('POST', '/v1/collections', body);
export const config = (id) => call('GET', `/v1/collections/${encodeURIComponent(id)}/config`, undefined, { bearer: '' });

/** The estimate document; `query` (range collections): {ranges: 'a:b,…', quantiles: 'q,…'}. */
export function estimates(id, query = {}) {
  // The server reads the values as written (no percent-decoding): plain numbers, ':' and ','
  // are sent as they are; anything else is encoded and left to the server's 400.
  const plain = (v) => (/^[0-9eE.:,+-]*$/.test(v) ? v : encodeURIComponent(v));
  const s = Object.entries(query).filter(([, v]) => v).map(([k, v]) => `${k}=${plain(v)}`).join('&');
  return call('GET', `/v1/collections/${encodeURIComponent(id)}/estimates${s ? `?${s}` : ''}`);
}

/** Stored reports per UTC day received: [{day: 'YYYY-MM-DD' | null, reports}]. */
export const days = (id) => call('GET', `/v1/collections/${encodeURIComponent(id)}/days`);

/**
 * A continuous-collection read: `endpoint` is `series` or `compare`, `params` its window
 * parameters (`from`, `to`, `a_from`, …; empty ones left out). ISO instants are sent as they are
 * (the server reads `:` or `%3A`).
 */
export function windowed(id, endpoint, params = {}) {
  const s = Object.entries(params).filter(([, v]) => v)
    .map(([k, v]) => `${k}=${/^[0-9A-Za-z:.-]*$/.test(v) ? v : encodeURIComponent(v)}`).join('&');
  return call('GET', `/v1/collections/${encodeURIComponent(id)}/${endpoint}${s ? `?${s}` : ''}`);
}
