// API keys (MX2, MX6) and connecting MCP clients to Engram (MX4): create a key with a name,
// scopes and an expiry; the key is shown once with a Copy button; the list shows each key's last
// use; revoking asks first. The "Connect" panel gives the MCP URL and the exact commands.
import { get, post, del, id } from './api.js';
import {
  h, clear, busy, badge, fmtTime, moreButton, notice, table, latestOnly, clearMessages,
} from './ui.js';
import { confirmAction, dialog, field, showFormError, secretBox } from './forms.js';

export async function keys(main) {
  const list = h('div', { class: 'keys-list' }, h('p', { class: 'loading', text: 'Loading keys…' }));
  const more = h('div');
  let items = [];
  const begin = latestOnly();

  const load = async (nextToken) => {
    const current = begin();
    const page = await get('/api/me/api-keys', { nextToken });
    if (!current()) return;
    items = nextToken ? items.concat(page.items) : page.items;
    clear(list, table([
      { label: 'Name', cell: (k) => k.name },
      { label: 'Key', cell: (k) => h('code', { text: `${k.hint}…` }) },
      { label: 'Scopes', cell: (k) => h('span', {}, k.scopes.map((s) => badge(s, s))) },
      { label: 'Created', cell: (k) => fmtTime(k.createdAt) },
      { label: 'Expires', cell: (k) => (k.expiresAt ? fmtTime(k.expiresAt) : 'never') },
      { label: 'Last used', cell: (k) => (k.lastUsedAt ? fmtTime(k.lastUsedAt) : 'never') },
      { label: '', cell: (k) => revokeButton(k) },
    ], items, { empty: 'No API keys yet.', caption: 'Your API keys' }));
    clear(more, moreButton(page.nextToken, load));
  };

  const revokeButton = (k) => {
    const button = h('button', { type: 'button', class: 'small danger', 'aria-label': `Revoke ${k.name}` }, 'Revoke');
    button.addEventListener('click', async () => {
      const sure = await confirmAction(`Revoke “${k.name}” (${k.hint}…)? Programs using it stop at their next request, and its open sockets close.`, { label: 'Revoke' });
      if (!sure) return;
      await busy(button, async () => { await del(`/api/me/api-keys/${id(k.id)}`); notice(`Revoked “${k.name}”.`); await load(); });
    });
    return button;
  };

  const name = h('input', { name: 'name', maxlength: 100, required: true, placeholder: 'laptop' });
  const read = h('input', { type: 'checkbox', name: 'read', checked: true });
  const write = h('input', { type: 'checkbox', name: 'write', checked: true });
  const expires = h('input', { type: 'date', name: 'expiresAt' });
  const form = h('form', { class: 'card' }, h('h2', { text: 'Create a key' }), h('div', { class: 'form-error' }),
    field('Name', name),
    h('fieldset', { class: 'scopes' }, h('legend', { text: 'Scopes' }),
      h('label', {}, read, ' read (the read tools, GET requests)'),
      h('label', {}, write, ' write (also remember, forget, store memories)')),
    field('Expires (optional)', expires, 'The key stops working at the start of that day (UTC).'),
    h('button', { type: 'submit' }, 'Create key'));
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    clearMessages();
    const scopes = [read.checked && 'read', write.checked && 'write'].filter(Boolean);
    try {
      const created = await post('/api/me/api-keys', {
        name: name.value.trim(), scopes, expiresAt: expires.value ? `${expires.value}T00:00:00Z` : undefined,
      });
      name.value = ''; expires.value = '';
      for (const el of form.querySelectorAll('.field-error, .form-error')) el.textContent = '';
      await load();
      await dialog({
        title: 'Your new API key',
        body: [h('p', { text: 'Copy it now: it is shown only this once (Engram keeps only its hash).' }), secretBox(created.key)],
        actions: [{ label: 'Done', value: null }],
      });
    } catch (err) {
      showFormError(form, err);
    }
  });

  clear(main,
    h('h1', { text: 'API keys' }),
    h('p', { class: 'muted', text: 'Keys let programs and other agents use Engram as you: the Python client, the engram command, MCP clients. A key cannot create or revoke keys, nor delete your account.' }),
    form, list, more, connectPanel());
  await load();
}

// How to connect Claude, ChatGPT and Claude Code to this stack's MCP server.
function connectPanel() {
  const url = `${location.origin}/mcp`;
  const code = (text) => h('pre', { class: 'command' }, h('code', { text }));
  const desktop = JSON.stringify({
    mcpServers: { engram: { command: 'npx', args: ['-y', 'mcp-remote', url, '--header', 'Authorization:${ENGRAM_AUTH}'], env: { ENGRAM_AUTH: 'Bearer egk_...' } } },
  }, null, 2);
  return h('section', { class: 'card connect', 'aria-labelledby': 'connect-title' },
    h('h2', { id: 'connect-title', text: 'Connect Claude / ChatGPT / Claude Code' }),
    h('p', {}, 'MCP server URL: ', h('code', { class: 'mcp-url', text: url })),
    h('h3', { text: 'Claude Code (with a key)' }),
    code(`claude mcp add --transport http engram ${url} --header "Authorization: Bearer egk_..."`),
    h('h3', { text: 'Claude Desktop (claude_desktop_config.json)' }),
    code(desktop),
    h('h3', { text: 'Claude and ChatGPT connectors (OAuth)' }),
    h('p', { class: 'muted', text: `Add a custom connector with the URL above; in its advanced settings give the OAuth client id from the stack's output McpClientId (no secret). You sign in on the stack's login page.` }),
    h('p', { class: 'muted', text: 'Replace egk_... with a key created above; a read-only key gets the read tools only.' }));
}
