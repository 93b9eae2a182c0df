// Tools: the MCP servers agents may call (connections). Add one (its auth value is sent once and
// never shown again, or OAuth: "Connect" opens the server's sign-in in a popup, TL9), test it (its
// tools, or what is wrong), see its tools and its health (what turns last met on it: healthy,
// degraded, down until a time, or unknown), delete it.
import { get, post, del, id } from './api.js';
import { h, clear, busy, fmtTime, latestOnly, moreButton, table, badge, errorBox, pretty } from './ui.js';
import { confirmAction, field, showFormError } from './forms.js';

export async function list(main) {
  const body = h('div');
  const more = h('div');
  const detail = h('div', { class: 'connection-detail' });
  let items = [];
  const begin = latestOnly();
  const load = async (nextToken) => {
    const current = begin();
    const page = await get('/api/connections', { nextToken });
    if (!current()) return;
    items = nextToken ? items.concat(page.items) : page.items;
    clear(body, table([
      { label: 'Name', cell: (c) => h('span', { class: 'conn-name', text: c.name }) },
      { label: 'URL', cell: (c) => h('code', { class: 'wrap', text: c.url }) },
      { label: 'Health', cell: (c) => healthCell(c.health) },
      { label: 'Auth', cell: authCell },
      { label: 'Timeout', cell: (c) => `${c.timeoutSeconds} s` },
      { label: 'Added', cell: (c) => fmtTime(c.createdAt) },
      { label: '', cell: (c) => actions(c, detail, load) },
    ], items, { empty: 'No tool servers yet. Add an MCP server (Streamable HTTP) your agents may call.' }));
    clear(more, moreButton(page.nextToken, load));
  };
  const name = h('input', { name: 'name', required: true, maxlength: 24, pattern: '[a-z0-9]([a-z0-9\\-]*[a-z0-9])?', placeholder: 'market' });
  const url = h('input', { name: 'url', required: true, maxlength: 2048, placeholder: 'https://tools.example.com/mcp', type: 'url' });
  const headerName = h('input', { name: 'authHeaderName', maxlength: 64, placeholder: 'Authorization' });
  const headerValue = h('input', { name: 'authHeaderValue', type: 'password', maxlength: 4096, autocomplete: 'off', placeholder: 'Bearer …' });
  const timeout = h('input', { name: 'timeoutSeconds', type: 'number', min: 1, max: 120, value: 20 });
  const useOAuth = h('input', { name: 'oauth', type: 'checkbox' });
  const clientId = h('input', { name: 'oauthClientId', maxlength: 512, autocomplete: 'off', placeholder: 'registered by Engram if empty' });
  const headerFields = h('div', { class: 'inline-fields header-auth' },
    field('Auth header', headerName, 'Optional.'),
    field('Auth value', headerValue, 'Stored encrypted; never shown again.'),
    field('Timeout (s)', timeout));
  const oauthFields = h('div', { class: 'inline-fields oauth-auth', hidden: true },
    field('OAuth client id', clientId, 'Optional: a client registered for Engram at the server.'));
  useOAuth.addEventListener('change', () => {
    oauthFields.hidden = !useOAuth.checked;
    for (const input of [headerName, headerValue]) input.disabled = useOAuth.checked;
  });
  const form = h('form', { class: 'card', novalidate: true }, h('h2', { text: 'Add a tool server' }), h('div', { class: 'form-error' }),
    h('div', { class: 'inline-fields' }, field('Name', name, 'Names its tools: mcp__<name>__<tool>.'), field('URL', url)),
    field('Sign in with OAuth (the server asks you to grant access)', useOAuth),
    headerFields, oauthFields,
    h('button', { type: 'submit' }, 'Add server'));
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    const payload = { name: name.value.trim(), url: url.value.trim(), timeoutSeconds: Number(timeout.value || 20) };
    if (useOAuth.checked) payload.oauth = clientId.value.trim() ? { clientId: clientId.value.trim() } : {};
    else if (headerValue.value) payload.authHeader = { name: headerName.value.trim() || 'Authorization', value: headerValue.value };
    const submit = form.querySelector('button[type=submit]');
    submit.disabled = true;
    try {
      const created = await post('/api/connections', payload);
      name.value = ''; url.value = ''; headerName.value = ''; headerValue.value = ''; timeout.value = 20; clientId.value = '';
      useOAuth.checked = false; useOAuth.dispatchEvent(new Event('change'));
      clear(form.querySelector('.form-error'));
      if (created.oauth) { await load(); showConnect(created, detail, load); }
      else { await test(created, detail, load); await load(); }
    } catch (err) {
      showFormError(form, err);
    } finally {
      submit.disabled = false;
    }
  });
  clear(main, h('h1', { text: 'Tool servers' }),
    h('p', { class: 'muted', text: 'MCP servers your agents can act through. Give an agent their tools in its settings (Edit).' }),
    body, more, detail, form);
  await load();
}

function authCell(c) {
  if (c.oauth) {
    return c.oauth.status === 'authorized' ? badge('OAuth: connected', 'succeeded') : badge('OAuth: needs authorization', 'warn');
  }
  return c.hasAuth ? badge(`${c.authHeaderName} set`, 'ok') : '—';
}

function actions(connection, detail, reload) {
  const tryIt = h('button', { type: 'button', class: 'small' }, 'Test');
  tryIt.addEventListener('click', () => busy(tryIt, async () => { await test(connection, detail, reload); await reload(); }));
  const buttons = [tryIt];
  if (connection.oauth) buttons.push(connectButton(connection, detail, reload, connection.oauth.status === 'authorized' ? 'Reconnect' : 'Connect'));
  const tools = h('button', { type: 'button', class: 'small secondary' }, 'Tools');
  tools.addEventListener('click', () => busy(tools, async () => showTools(await get(`/api/connections/${id(connection.id)}`), detail)));
  const remove = h('button', { type: 'button', class: 'small danger' }, 'Delete');
  remove.addEventListener('click', async () => {
    if (!(await confirmAction(`Delete the tool server ${connection.name}? Agents that use it lose its tools.`))) return;
    await busy(remove, async () => { await del(`/api/connections/${id(connection.id)}`); clear(detail); await reload(); });
  });
  buttons.push(tools, remove);
  return h('div', { class: 'row-actions' }, ...buttons);
}

// OAuth (TL9): the popup is opened on the click itself (so no blocker stops it), then sent to the
// authorization URL; Engram's callback page tells this page the outcome on a BroadcastChannel (the
// console's Cross-Origin-Opener-Policy cuts the popup's opener once it visits the authorization
// server) and closes. Without a popup the page goes there itself.
function connectButton(connection, detail, reload, label = 'Connect') {
  const button = h('button', { type: 'button', class: 'small connect' }, label);
  button.addEventListener('click', () => {
    const popup = window.open('', 'engram-oauth', 'popup,width=520,height=680');
    return busy(button, async () => {
      let started;
      try {
        started = await post(`/api/connections/${id(connection.id)}/oauth/start`);
      } catch (err) {
        if (popup) popup.close();
        throw err;
      }
      if (!popup) { window.location.assign(started.authorizationUrl); return; }
      const channel = new BroadcastChannel('engram-oauth');
      const outcome = new Promise((resolve) => {
        channel.onmessage = (e) => { if (e.data && e.data.engramOAuth) resolve(e.data); };
        setTimeout(() => resolve(null), Math.max(0, Date.parse(started.expiresAt) - Date.now()));
      });
      popup.location.href = started.authorizationUrl;
      clear(detail, h('section', { class: 'card test-result' },
        h('p', { class: 'loading', text: `Waiting for ${connection.name}'s sign-in in the other window…` })));
      const result = await outcome;
      channel.close();
      await reload();
      if (result && result.engramOAuth === 'done') {
        await test(connection, detail, reload);
      } else {
        clear(detail, h('section', { class: 'card test-result' },
          h('h2', { text: `${connection.name}: not connected` }),
          errorBox({ code: 'authorization_refused', message: result ? result.message : 'The sign-in was not finished in time.' })));
      }
    });
  });
  return button;
}

function showConnect(connection, detail, reload, error) {
  clear(detail, h('section', { class: 'card test-result' },
    h('h2', { text: `${connection.name}: needs authorization` }),
    error ? errorBox(error) : h('p', { text: 'This server signs Engram in with OAuth: connect it to grant access.' }),
    connectButton(connection, detail, reload)));
}

async function test(connection, detail, reload) {
  clear(detail, h('section', { class: 'card' }, h('p', { class: 'loading', text: `Testing ${connection.name}…` })));
  const out = await post(`/api/connections/${id(connection.id)}/test`);
  if (!out.ok && out.error && out.error.code === 'needs_authorization') {
    showConnect(connection, detail, reload, out.error);
    return;
  }
  if (!out.ok) {
    clear(detail, h('section', { class: 'card test-result' },
      h('h2', { text: `${connection.name}: not working` }),
      errorBox(out.error),
      h('p', { class: 'muted', text: `after ${Math.round(out.durationMs || 0)} ms` })));
    return;
  }
  showTools({ ...connection, tools: out, health: null }, detail, `${connection.name}: ${out.tools.length} tool(s), listed in ${Math.round(out.durationMs)} ms`);
}

const HEALTH = {
  healthy: ['healthy', 'succeeded'],
  degraded: ['degraded', 'warn'],
  down: ['down', 'failed'],
  unknown: ['not used yet', 'archived'],
};

// The state as a badge; the last error and, while down, until when turns skip the server.
function healthBadge(health) {
  const [label, kind] = HEALTH[health.state] || [health.state, 'archived'];
  return badge(label, kind);
}

// Cool-downs are seconds to minutes long: the time to the second.
function clock(iso) {
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? String(iso) : d.toLocaleTimeString();
}

function healthCell(health) {
  if (!health) return '—';
  const cell = h('div', { class: 'health' }, healthBadge(health));
  if (health.state === 'down' && health.retryAfter) cell.append(h('div', { class: 'muted small', text: `skipped until ${clock(health.retryAfter)}` }));
  if (health.state !== 'healthy' && health.lastError) {
    cell.append(h('div', { class: 'muted small health-error', text: `${health.lastError.code} · ${fmtTime(health.lastErrorAt)}` }));
  }
  return cell;
}

function healthDetail(health) {
  if (!health) return [];
  const lines = [h('p', {}, 'Health: ', healthBadge(health))];
  const facts = [
    ['Last success', fmtTime(health.lastSuccessAt)],
    ['Last error', health.lastError ? `${fmtTime(health.lastErrorAt)}: ${health.lastError.code}: ${health.lastError.message}` : '—'],
    ['Failures in a row', String(health.consecutiveFailures)],
  ];
  if (health.retryAfter) facts.push(['Not contacted before', `${fmtTime(health.retryAfter)} (${clock(health.retryAfter)})`]);
  lines.push(h('dl', { class: 'health-facts' }, facts.map(([k, v]) => [h('dt', { text: k }), h('dd', { text: v })])));
  return lines;
}

function showTools(connection, detail, title) {
  const listed = connection.tools;
  clear(detail, h('section', { class: 'card test-result' },
    h('h2', { text: title || `${connection.name}: tools` }),
    healthDetail(connection.health),
    !listed ? h('p', { class: 'muted', text: 'Not listed yet: press Test.' })
      : [h('p', { class: 'muted', text: `Listed ${fmtTime(listed.listedAt)}` }),
        h('ul', { class: 'tool-list' }, listed.tools.map((t) => h('li', {},
          h('details', {},
            h('summary', {}, h('code', { text: `mcp__${connection.name}__${t.name}` }), ' ', h('span', { class: 'muted', text: t.description || '' })),
            h('pre', { text: pretty(t.inputSchema) })))))]));
}
