// The public HTTP API, from this origin only: every call is a same-origin path under /api/ with
// the signed-in person's token. Errors come back as ApiError with the envelope's code and message.
import * as auth from './auth.js';

export class ApiError extends Error {
  constructor(status, code, message, field, runId, details) {
    super(message);
    this.status = status;
    this.code = code;
    this.field = field || null;
    this.runId = runId || null;
    this.details = Array.isArray(details) ? details : []; // every broken rule: [{field, message}]
    this.limit = null; // limit_exceeded: {name, scope, value, spentUsd?, resetsAt?}
  }
}

const onSignedOut = new Set();
export function whenSignedOut(callback) {
  onSignedOut.add(callback);
}

export const id = (value) => encodeURIComponent(String(value));

export async function api(method, path, { body, query } = {}) {
  if (!/^\/api\/[A-Za-z0-9_\-/%:.]*$/.test(path)) throw new ApiError(0, 'bad_path', `not an API path: ${path}`);
  const token = auth.token();
  if (!token) {
    for (const callback of onSignedOut) callback();
    throw new ApiError(401, 'signed_out', 'your session has ended; sign in again');
  }
  let url = path;
  if (query) {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(query)) if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
    if ([...q].length) url += `?${q}`;
  }
  const headers = { Authorization: `Bearer ${token}`, Accept: 'application/json' };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  let res;
  try {
    res = await fetch(url, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), credentials: 'omit', cache: 'no-store' });
  } catch (err) {
    throw new ApiError(0, 'network_error', `the API did not answer (${err.message})`);
  }
  let payload = null;
  try { payload = await res.json(); } catch { payload = null; }
  if (res.ok && payload && payload.success) return payload.data;
  if (payload && payload.error) {
    const err = new ApiError(res.status, payload.error.code, payload.error.message, payload.error.field, payload.error.runId, payload.error.details);
    if (payload.error.limit && typeof payload.error.limit === 'object') err.limit = payload.error.limit;
    throw err;
  }
  if (res.status === 401) {
    for (const callback of onSignedOut) callback();
    throw new ApiError(401, 'unauthorized', 'the API refused your token; sign in again');
  }
  // Not our envelope: API Gateway's own answers (429 throttled, 503 timeout) carry {message}.
  const message = (payload && payload.message) || res.statusText || 'the request failed';
  throw new ApiError(res.status, `http_${res.status}`, message);
}

export const get = (path, query) => api('GET', path, { query });
export const post = (path, body = {}, query) => api('POST', path, { body, query });
export const patch = (path, body) => api('PATCH', path, { body });
export const put = (path, body) => api('PUT', path, { body });
export const del = (path) => api('DELETE', path);

// Every page of a list (for pickers and charts), up to `max` items.
export async function all(path, query = {}, max = 1000) {
  const items = [];
  let nextToken;
  do {
    const page = await get(path, { ...query, limit: 100, nextToken });
    items.push(...page.items);
    nextToken = page.nextToken;
  } while (nextToken && items.length < max);
  return items;
}
