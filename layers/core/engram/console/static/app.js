// The console's shell: sign-in, navigation and a hash router (#/agents, #/agents/<id>, ...).
// Pages are modules loaded when first opened; each exports render(main, params).
import * as auth from './auth.js';
import { whenSignedOut } from './api.js';
import { h, clear, errorBox, clearMessages, FAREWELL } from './ui.js';
import { waiting, heldCount } from './waiting.js';

const ROUTES = [
  [/^#\/agents\/?$/, 'agents.js', 'list'],
  [/^#\/agents\/new$/, 'agent.js', 'create'],
  [/^#\/agents\/([^/]+)$/, 'agent.js', 'detail'],
  [/^#\/agents\/([^/]+)\/edit$/, 'agent.js', 'edit'],
  [/^#\/agents\/([^/]+)\/chat(?:\/([^/]+))?$/, 'chat.js', 'chat'],
  [/^#\/agents\/([^/]+)\/runs$/, 'runs.js', 'list'],
  [/^#\/agents\/([^/]+)\/decisions$/, 'allruns.js', 'decisions'],
  [/^#\/runs\/?(?:\?(.*))?$/, 'allruns.js', 'runs'],
  [/^#\/runs\/([^/]+)$/, 'runs.js', 'detail'],
  [/^#\/memory(?:\/(agent|workspace)\/([^/]+))?$/, 'memory.js', 'memory'],
  [/^#\/workspaces\/?$/, 'workspaces.js', 'list'],
  [/^#\/tools\/?$/, 'connections.js', 'list'],
  [/^#\/facts$/, 'facts.js', 'facts'],
  [/^#\/usage\/?(?:\?(.*))?$/, 'usage.js', 'usage'],
  [/^#\/keys$/, 'keys.js', 'keys'],
];

const NAV = [
  ['#/agents', 'Agents'],
  ['#/runs', 'Runs'],
  ['#/memory', 'Memory'],
  ['#/workspaces', 'Workspaces'],
  ['#/tools', 'Tools'],
  ['#/facts', 'What I know about you'],
  ['#/usage', 'Usage'],
  ['#/keys', 'API keys'],
];

let main;
let nav;

function shell() {
  const app = document.getElementById('app');
  nav = h('nav', { class: 'nav', 'aria-label': 'Main' });
  main = h('main', { id: 'main', tabindex: '-1' });
  clear(app,
    h('header', { class: 'top' },
      h('a', { href: '#/agents', class: 'brand' }, 'Engram'),
      nav,
      h('div', { class: 'who' },
        h('span', { class: 'user', id: 'signed-in-user', text: auth.user() || '' }),
        h('button', { type: 'button', class: 'link', onclick: () => auth.signOut() }, 'Sign out'))),
    h('div', { id: 'messages', 'aria-live': 'polite' }),
    main);
}

const WAITING = '#/runs?status=awaiting_approval';

function markNav(hash) {
  const waitingLink = h('a', { href: WAITING, class: 'nav-waiting', hidden: true, 'aria-current': hash === WAITING ? 'page' : null });
  clear(nav, NAV.map(([href, label]) => {
    const active = hash !== WAITING && (hash === href || hash.startsWith(`${href}/`) || hash.startsWith(`${href}?`) || (href === '#/agents' && /^#\/agents\//.test(hash)));
    const link = h('a', { href, 'aria-current': active ? 'page' : null }, label);
    return href === '#/runs' ? [link, waitingLink] : link;
  }));
  countWaiting(waitingLink);
}

// Beside Runs: how many tool calls wait for the owner's approval (hidden when none).
async function countWaiting(link, fresh = false) {
  const runs = await waiting({ fresh });
  const n = runs.reduce((total, run) => total + heldCount(run), 0);
  link.hidden = n === 0;
  clear(link, h('span', { class: 'nav-count', text: `${n}${runs.more ? '+' : ''}` }), ' waiting', h('span', { class: 'visually-hidden', text: ' for your approval' }));
}
window.addEventListener('engram:approvals', () => {
  const link = nav && nav.querySelector('.nav-waiting');
  if (link) countWaiting(link, true);
});

async function route() {
  sessionStorage.removeItem(FAREWELL);
  const hash = location.hash && location.hash !== '#/' ? location.hash : '#/agents';
  clearMessages();
  markNav(hash);
  for (const [pattern, module, page] of ROUTES) {
    const found = hash.match(pattern);
    if (!found) continue;
    const params = found.slice(1).map((p) => (p === undefined ? undefined : decodeURIComponent(p)));
    // Each navigation renders into its own view: a page still loading when the person moves on
    // (its data came late) fills a view no longer on screen instead of replacing the new page.
    const view = h('div', { class: 'view' }, h('p', { class: 'loading', text: 'Loading…' }));
    clear(main, view);
    try {
      const mod = await import(`./${module}`);
      await mod[page](view, ...params);
    } catch (err) {
      clear(view, errorBox(err));
    }
    if (!view.isConnected) return;
    // A page that put the focus somewhere (a form's first field) keeps it.
    if (!view.contains(document.activeElement)) main.focus({ preventScroll: true });
    return;
  }
  clear(main, errorBox({ code: 'not_found', message: `no page ${hash}` }));
}

// After "Delete my account": the confirmation that it happened, once.
function farewell() {
  const raw = sessionStorage.getItem(FAREWELL); // kept until someone signs in (route() drops it)
  if (raw === null) return null;
  let counts = {};
  try { counts = JSON.parse(raw) || {}; } catch { counts = {}; }
  const total = typeof counts === 'object' ? Object.values(counts).reduce((a, n) => a + (Number(n) || 0), 0) : 0;
  return h('div', { class: 'notice account-deleted', role: 'status' },
    h('strong', { text: 'Your account was deleted.' }),
    ` Everything it held (${total} record${total === 1 ? '' : 's'}: agents, sessions, memories, facts, runs, usage) is gone; signing in again starts an empty account.`);
}

function signInPage(config, failure) {
  const app = document.getElementById('app');
  const box = h('div', { class: 'signin-error' });
  if (failure) box.append(errorBox(failure));
  const card = h('section', { class: 'signin card' }, h('h1', { text: 'Engram console' }), farewell(), box);
  if (config.signIn === 'dev') {
    const input = h('input', { id: 'dev-user', name: 'user', autocomplete: 'username', required: true, placeholder: 'alice' });
    const form = h('form', { onsubmit: (e) => {
      e.preventDefault();
      try { auth.signInDev(input.value); start(); } catch (err) { clear(box, errorBox(err)); }
    } },
    h('p', { class: 'muted', text: 'Local stack: sign in as any dev user (sent as Bearer dev-<user>, accepted on loopback only).' }),
    h('label', { for: 'dev-user', text: 'Dev user' }), input,
    h('button', { type: 'submit' }, 'Sign in'));
    card.append(form);
    setTimeout(() => input.focus(), 0);
  } else if (config.signIn === 'managed-login') {
    card.append(
      h('p', { class: 'muted', text: 'Sign in with the stack\u2019s user pool.' }),
      h('button', { type: 'button', onclick: () => auth.startManagedLogin() }, 'Sign in'),
    );
  } else {
    const input = h('textarea', { id: 'pasted-token', name: 'token', rows: 4, required: true, spellcheck: 'false' });
    card.append(h('form', { onsubmit: (e) => {
      e.preventDefault();
      try { auth.signInWithToken(input.value); start(); } catch (err) { clear(box, errorBox(err)); }
    } },
    h('p', { class: 'muted', text: 'This stack trusts an external issuer: paste an access token from it. It is kept in this tab only.' }),
    h('label', { for: 'pasted-token', text: 'Access token' }), input,
    h('button', { type: 'submit' }, 'Sign in')));
  }
  clear(app, card);
}

async function start() {
  let config;
  try {
    config = await auth.loadConfig();
  } catch (err) {
    clear(document.getElementById('app'), errorBox(err));
    return;
  }
  let failure = null;
  if (config.signIn === 'managed-login') {
    try { await auth.finishManagedLogin(); } catch (err) { failure = err; }
  }
  if (!auth.token()) {
    signInPage(config, failure);
    return;
  }
  shell();
  await route();
}

whenSignedOut(() => {
  if (!auth.token()) start();
});
window.addEventListener('hashchange', () => { if (auth.token()) route(); else start(); });
window.addEventListener('unhandledrejection', (event) => {
  const where = document.getElementById('messages');
  if (where) clear(where, errorBox(event.reason));
});
start();
