// Memory: an agent's or a workspace's long-term memory as a table. Source badges (manual / auto /
// director), pinned, importance, category, dates, superseded rows with their supersededBy link;
// create and edit manual rows (auto and director rows are read-only but can be pinned or deleted);
// search and filter.
import { get, post, patch, del, all, id } from './api.js';
import {
  h, clear, busy, badge, fmtTime, moreButton, notice, errorBox, latestOnly,
} from './ui.js';
import { confirmAction, dialog, field, showFormError } from './forms.js';

export async function memory(main, scope, ownerId) {
  const [agents, workspaces] = await Promise.all([all('/api/agents'), all('/api/workspaces')]);
  const choose = h('select', { id: 'memory-owner', name: 'owner' },
    h('option', { value: '' }, 'Choose an agent or a workspace…'),
    h('optgroup', { label: 'Agents' }, agents.map((a) => h('option', { value: `agent/${a.id}` }, a.name))),
    h('optgroup', { label: 'Workspaces' }, workspaces.map((w) => h('option', { value: `workspace/${w.id}` }, w.name))));
  choose.value = scope && ownerId ? `${scope}/${ownerId}` : '';
  choose.addEventListener('change', () => { location.hash = choose.value ? `#/memory/${choose.value}` : '#/memory'; });
  const body = h('div');
  clear(main, h('div', { class: 'page-head' }, h('h1', { text: 'Memory' }), field('Memory of', choose)), body);
  if (!scope || !ownerId) {
    body.append(h('p', { class: 'empty', text: 'Select an agent or a workspace to see what it remembers.' }));
    return;
  }
  const owner = scope === 'agent' ? agents.find((a) => a.id === ownerId) : workspaces.find((w) => w.id === ownerId);
  if (!owner) {
    body.append(errorBox({ code: `${scope}_not_found`, message: `no ${scope} ${ownerId}` }));
    return;
  }
  await memoryTable(body, `/api/${scope === 'agent' ? 'agents' : 'workspaces'}/${id(ownerId)}/memories`, owner, scope);
}

export async function memoryTable(body, base, owner, scope, title = `${scope === 'agent' ? 'Agent' : 'Workspace'} memory: ${owner.name}`) {
  const search = h('input', { type: 'search', id: 'memory-search', name: 'q', placeholder: 'words in a key or value', maxlength: 200 });
  const source = h('select', { id: 'memory-source', name: 'source' },
    [['all', 'all'], ['manual', 'manual (by hand or asked for in chat)'], ['chat', 'chat'], ['auto', 'auto'], ['director', 'director'], ['profile', 'profile']]
      .map(([v, label]) => h('option', { value: v }, label)));
  // "manual" is what a person put there: by hand, or by asking the agent in chat to remember it.
  const sources = () => (source.value === 'all' ? undefined : source.value === 'manual' ? 'manual,chat' : source.value);
  const archived = h('input', { type: 'checkbox', id: 'memory-archived' });
  const tbody = h('tbody', {}, h('tr', {}, h('td', { colspan: 8, class: 'loading', text: 'Loading memories…' })));
  const more = h('div');
  const count = h('span', { class: 'muted', role: 'status' }); // read out when a search changes it
  let rows = [];

  // The search and the filters go to the API, which searches every row of the owner's (not just
  // the page on screen) and ranks the best match first, as the agent's recall does.
  let filtered = false;
  const render = (hasMore) => {
    const empty = filtered ? 'No memories match.' : 'No memories yet.';
    clear(tbody, rows.length ? rows.map((m) => rowView(m)) : h('tr', {}, h('td', { colspan: 8, class: 'empty', text: empty })));
    count.textContent = `${rows.length}${hasMore ? '+' : ''} ${filtered ? 'matching' : 'shown'}`;
  };
  const begin = latestOnly();
  const load = async (nextToken) => {
    const current = begin();
    const q = search.value.trim();
    const page = await get(base, { includeArchived: archived.checked ? 'true' : undefined, q, source: sources(), nextToken });
    if (!current()) return; // an older load answered after a newer one
    filtered = Boolean(q || sources());
    rows = nextToken ? rows.concat(page.items) : page.items;
    clear(more, moreButton(page.nextToken, load));
    render(Boolean(page.nextToken));
  };
  const reload = () => busy(null, () => load());

  const rowView = (m) => {
    const editable = m.source === 'manual' && !m.archivedAt;
    const pin = h('button', { type: 'button', class: 'small secondary', 'aria-pressed': String(Boolean(m.pinned)) }, m.pinned ? 'Unpin' : 'Pin');
    pin.addEventListener('click', () => busy(pin, async () => {
      await patch(`${base}/${id(m.id)}/pin`, { pinned: !m.pinned });
      await load();
    }));
    const remove = h('button', { type: 'button', class: 'small danger' }, 'Delete');
    remove.addEventListener('click', async () => {
      if (!(await confirmAction(`Delete the memory “${m.key}”?`))) return;
      await busy(remove, async () => { await del(`${base}/${id(m.id)}`); await load(); });
    });
    const editButton = editable ? h('button', { type: 'button', class: 'small secondary' }, 'Edit') : null;
    if (editButton) editButton.addEventListener('click', () => editRow(base, m, load));
    return h('tr', { id: `mem-${m.id}`, class: m.archivedAt ? 'archived' : '' },
      h('td', { 'data-label': 'Source' }, badge(m.source), m.pinned ? badge('pinned', 'pinned') : null),
      h('td', { 'data-label': 'Key' }, h('code', { text: m.key })),
      h('td', { 'data-label': 'Value', class: 'value' }, h('div', { text: m.value }),
        editable || m.archivedAt ? null : h('div', { class: 'muted small-text', text: `${m.source}-captured · read-only` }),
        m.supersededBy ? h('div', { class: 'muted small-text' }, 'superseded by ', h('a', { href: `#/memory/${scope}/${id(owner.id)}`, class: 'superseded-link', dataset: { target: m.supersededBy }, onclick: (e) => { e.preventDefault(); jump(m.supersededBy); } }, m.supersededBy)) : null,
        m.archivedAt ? h('div', { class: 'muted small-text', text: `archived ${fmtTime(m.archivedAt)}${m.archivedReason ? ` (${m.archivedReason})` : ''}` }) : null),
      h('td', { 'data-label': 'Category', text: m.category }),
      h('td', { 'data-label': 'Importance', text: String(m.importance) }),
      h('td', { 'data-label': 'Created', text: fmtTime(m.createdAt) }),
      h('td', { 'data-label': 'Updated', text: fmtTime(m.updatedAt) }),
      h('td', { 'data-label': 'Actions', class: 'row-actions' }, editButton, pin, remove));
  };

  let typing;
  search.addEventListener('input', () => { clearTimeout(typing); typing = setTimeout(reload, 250); });
  source.addEventListener('change', reload);
  archived.addEventListener('change', reload);

  const key = h('input', { name: 'key', required: true, maxlength: 255 });
  const value = h('textarea', { name: 'value', rows: 2, required: true });
  const category = h('select', { name: 'category' }, h('option', { value: 'core' }, 'core'), h('option', { value: 'daily' }, 'daily (expires)'));
  const importance = h('input', { name: 'importance', type: 'number', min: 0, max: 100, value: '0' });
  const pinned = h('input', { type: 'checkbox', name: 'pinned' });
  const add = h('form', { class: 'card memory-add' },
    h('h2', { text: 'Add a manual memory' }), h('div', { class: 'form-error' }),
    h('div', { class: 'inline-fields' },
      field('Key', key), field('Value', value), field('Category', category), field('Importance', importance), field('Pinned', pinned)),
    h('button', { type: 'submit' }, 'Add memory'));
  add.addEventListener('submit', async (e) => {
    e.preventDefault();
    const submit = add.querySelector('button[type=submit]');
    submit.disabled = true;
    try {
      await post(base, { key: key.value.trim(), value: value.value.trim(), category: category.value, importance: Number(importance.value || 0), pinned: pinned.checked });
      key.value = ''; value.value = ''; importance.value = '0'; pinned.checked = false;
      for (const el of add.querySelectorAll('.field-error, .form-error')) el.textContent = '';
      notice('Memory saved.');
      await load();
    } catch (err) {
      showFormError(add, err);
    } finally {
      submit.disabled = false;
    }
  });

  // An agent with agent memory off is never given its rows (only the workspace's and the facts).
  const unused = scope === 'agent' && !owner.agentMemory
    ? h('p', { class: 'warning memory-off', role: 'note' }, `Agent memory is off for ${owner.name}: the agent is not given these rows, and rows added here stay unused until you turn it on (Edit the agent).`)
    : null;
  clear(body,
    h('h2', { text: title }), unused,
    h('div', { class: 'filters' },
      field('Search', search), field('Source', source), field('Show archived and superseded', archived), count),
    h('div', { class: 'table-wrap' }, h('table', { class: 'memory-table' },
      h('thead', {}, h('tr', {}, ['Source', 'Key', 'Value', 'Category', 'Importance', 'Created', 'Updated', ''].map((t) => h('th', { scope: 'col', text: t })))),
      tbody)),
    more, add);
  await load();
}

function jump(memoryId) {
  const row = document.getElementById(`mem-${memoryId}`);
  if (!row) {
    notice('That row is not loaded: load more, or show archived rows.');
    return;
  }
  row.scrollIntoView({ block: 'center' });
  row.classList.add('flash');
  setTimeout(() => row.classList.remove('flash'), 1500);
}

async function editRow(base, m, reload) {
  const value = h('textarea', { name: 'value', rows: 4, value: m.value });
  const importance = h('input', { name: 'importance', type: 'number', min: 0, max: 100, value: String(m.importance) });
  const category = h('select', { name: 'category' }, h('option', { value: 'core' }, 'core'), h('option', { value: 'daily' }, 'daily (expires)'));
  category.value = m.category === 'daily' ? 'daily' : 'core';
  const topic = h('input', { name: 'topic', maxlength: 40, value: m.topic || '' });
  const form = h('form', {}, h('div', { class: 'form-error' }), field('Value', value), field('Importance', importance), field('Category', category), field('Topic', topic));
  setTimeout(() => value.focus(), 0);
  for (;;) {
    const ok = await dialog({ title: `Edit ${m.key}`, body: form, actions: [{ label: 'Cancel', value: false }, { label: 'Save', value: true }] });
    if (!ok) return;
    try {
      const body = { value: value.value.trim(), importance: Number(importance.value || 0), topic: topic.value.trim() || null };
      if (m.category !== 'conversation') body.category = category.value;
      await patch(`${base}/${id(m.id)}`, body);
      await reload();
      return;
    } catch (err) {
      showFormError(form, err);
    }
  }
}
