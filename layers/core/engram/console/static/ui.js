// Small DOM helpers. Text always goes in as text (textContent), never as HTML: what the API
// returns (memories, facts, transcripts) is data a model or another person may have written.

export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name === 'class') el.className = value;
    else if (name === 'text') el.textContent = value;
    else if (name.startsWith('on') && typeof value === 'function') el.addEventListener(name.slice(2), value);
    else if (name === 'value') el.value = value;
    else if (name === 'checked') el.checked = Boolean(value);
    else if (name === 'dataset') Object.assign(el.dataset, value);
    else el.setAttribute(name, value === true ? '' : String(value));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

export function svg(tag, attrs = {}, ...children) {
  const el = document.createElementNS('http://www.w3.org/2000/svg', tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value !== undefined && value !== null) el.setAttribute(name, String(value));
  }
  append(el, children);
  return el;
}

// A stylesheet of some pages only (insight.css), added once; resolves when it is applied, so a
// module that awaits it at its top draws its page styled (no flash of unstyled content).
const sheets = new Map();
export function stylesheet(name) {
  if (!sheets.has(name)) {
    sheets.set(name, new Promise((resolve) => {
      const link = h('link', { rel: 'stylesheet', href: `/console/${name}` });
      link.addEventListener('load', resolve, { once: true });
      link.addEventListener('error', resolve, { once: true }); // unstyled beats not at all
      document.head.append(link);
    }));
  }
  return sheets.get(name);
}

export function clear(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

// sessionStorage key: what a deleted account's sign-out says on the sign-in page that follows.
export const FAREWELL = 'engram.accountDeleted';

// What went wrong, in words: a few codes a person meets get a heading of their own; any other code
// is read as words ("missing_default_prompt" -> "Missing default prompt"). The raw code stays on
// the element (data-code) for support and tests, not in the text.
const TITLES = {
  validation_error: 'Check this value', not_found: 'Not found', network_error: 'No answer from the API',
  unauthorized: 'Signed out', signed_out: 'Signed out', forbidden: 'Not allowed', conflict: 'Conflict',
  rate_limited: 'Too many requests', quota_exceeded: 'Quota reached', value_too_long: 'Too long',
  secret_detected: 'Looks like a secret', model_not_configured: 'The model is not set up',
  limit_exceeded: 'Limit reached',
};
export function errorTitle(code) {
  if (!code) return 'Something went wrong';
  if (TITLES[code]) return TITLES[code];
  if (/_not_found$/.test(code)) return 'Not found';
  if (/^http_\d+$/.test(code)) return `The API answered ${code.slice(5)}`;
  const words = String(code).replace(/_/g, ' ');
  return words.charAt(0).toUpperCase() + words.slice(1);
}

// An API error (or any error) as a readable message: a heading in words and the API's message.
export function errorBox(err) {
  const code = err && err.code ? err.code : 'error';
  const message = err && err.message ? err.message : String(err);
  const box = h('div', { class: 'error', role: 'alert', dataset: { code } }, h('strong', { text: `${errorTitle(code)}:` }), ' ', message);
  if (err && err.runId) box.append(' ', h('span', { class: 'muted', text: `(run ${err.runId})` }));
  if (err && err.limit) box.append(limitLine(err.limit));
  return box;
}

// A spending limit that stopped a turn (limit_exceeded): which, spent, when it resets, where to change it.
function limitLine(limit) {
  const words = { dailyCostUsd: 'daily cost limit', monthlyCostUsd: 'monthly cost limit', toolCallsPerTurn: 'tool calls per turn' };
  const cost = limit.name !== 'toolCallsPerTurn';
  const value = cost ? fmtCost(limit.value) : fmtNum(limit.value);
  return h('div', { class: 'limit-line' },
    `${limit.scope === 'user' ? 'Your' : 'The agent\u2019s'} ${words[limit.name] || limit.name}: ${value}`,
    cost && limit.spentUsd !== undefined ? `, spent ${fmtCost(limit.spentUsd)}` : '',
    limit.resetsAt ? `; resets ${fmtTime(limit.resetsAt)}` : '',
    limit.scope === 'user' ? [' · ', h('a', { href: '#/usage', text: 'change your limits' })] : ' · change it in the agent\u2019s Edit');
}

// Shows `err` in the page's message area (top of the main view) and returns it for chaining.
export function showError(err, where = document.getElementById('messages')) {
  if (!where) return err;
  clear(where, errorBox(err));
  where.scrollIntoView({ block: 'nearest' });
  return err;
}

// A passing message at the top of the page: gone after a few seconds (`sticky`: until the caller
// removes the returned box, e.g. when what it announces has finished) and at the next navigation.
export function notice(text, where = document.getElementById('messages'), { sticky = false } = {}) {
  if (!where) return null;
  const box = h('div', { class: 'notice', role: 'status', text });
  clear(where, box);
  if (!sticky) setTimeout(() => box.remove(), 4000);
  return box;
}

export function clearMessages() {
  const where = document.getElementById('messages');
  if (where) where.replaceChildren();
}

// Runs an async action from a button: disables it meanwhile and reports a failure in the page.
export async function busy(button, action, where) {
  clearMessages(); // the last action's notice or error is about something else now
  if (button) button.disabled = true;
  try {
    return await action();
  } catch (err) {
    showError(err, where);
    return undefined;
  } finally {
    if (button) button.disabled = false;
  }
}

export function badge(text, kind = text) {
  return h('span', { class: `badge badge-${String(kind).replace(/[^a-z_-]/gi, '')}`, text });
}

export function fmtTime(iso) {
  if (!iso) return '—';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return String(iso);
  return d.toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'short' });
}

export function fmtAge(seconds) {
  if (seconds === null || seconds === undefined) return '—';
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m`;
  const hrs = Math.floor(m / 60);
  if (hrs < 48) return `${hrs}h ${m % 60}m`;
  return `${Math.floor(hrs / 24)}d ${hrs % 24}h`;
}

// Numbers with the reader's thousands separators (Intl.NumberFormat): 12,345 tokens, $1,234.5600.
const INTEGER = new Intl.NumberFormat(undefined, { maximumFractionDigits: 0 });
const DOLLARS = [4, 5].map((digits) => new Intl.NumberFormat(undefined, { minimumFractionDigits: digits, maximumFractionDigits: digits }));
export function fmtNum(n) {
  if (n === null || n === undefined || !Number.isFinite(Number(n))) return '—';
  return INTEGER.format(Number(n));
}

export function fmtCost(usd) {
  if (usd === null || usd === undefined) return '—';
  const n = Number(usd);
  return `$${(n < 0.01 && n > 0 ? DOLLARS[1] : DOLLARS[0]).format(n)}`;
}

export function fmtMs(ms) {
  if (ms === null || ms === undefined || !(ms >= 0)) return '—';
  return ms < 1000 ? `${fmtNum(ms)} ms` : `${(ms / 1000).toFixed(ms < 10000 ? 2 : 1)} s`;
}

export function fmtBytes(n) {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} kB`;
  return `${(n / 1024 / 1024).toFixed(2)} MB`;
}

export function fmtDuration(fromIso, toIso) {
  if (!fromIso || !toIso) return '—';
  const ms = new Date(toIso) - new Date(fromIso);
  if (!(ms >= 0)) return '—';
  return ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(1)} s`;
}

export function table(columns, rows, { empty = 'Nothing here yet.', caption } = {}) {
  if (!rows.length) return h('p', { class: 'empty', text: empty });
  const head = h('tr', {}, columns.map((c) => h('th', { scope: 'col', text: c.label })));
  const body = rows.map((row) => h('tr', {}, columns.map((c) => h('td', { 'data-label': c.label }, c.cell(row)))));
  return h('div', { class: 'table-wrap' }, h('table', {}, caption ? h('caption', { text: caption }) : null, h('thead', {}, head), h('tbody', {}, body)));
}

// For a list reloaded while an earlier load may still be in flight: `const current = begin();`
// before the request, `if (!current()) return;` after it, so a slower older answer is dropped.
export function latestOnly() {
  let latest = 0;
  return () => {
    const mine = ++latest;
    return () => mine === latest;
  };
}

// A "Load more" control for a list that pages with nextToken.
export function moreButton(nextToken, load) {
  if (!nextToken) return null;
  const button = h('button', { type: 'button', class: 'more' }, 'Load more');
  button.addEventListener('click', () => busy(button, () => load(nextToken)));
  return button;
}

export function pretty(value) {
  if (typeof value === 'string') return value;
  try { return JSON.stringify(value, null, 2); } catch { return String(value); }
}

export function link(href, text, attrs = {}) {
  return h('a', { href, ...attrs }, text);
}
