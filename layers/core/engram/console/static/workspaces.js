// Workspaces: shared memory for the agents placed in them. List, create, rename, delete.
import { get, post, patch, del, all, id } from './api.js';
import { h, clear, busy, fmtTime, latestOnly, moreButton, table } from './ui.js';
import { confirmAction, dialog, field, showFormError } from './forms.js';

export async function list(main) {
  const body = h('div', {}, h('p', { class: 'loading', text: 'Loading workspaces…' }));
  const more = h('div');
  let items = [];
  const begin = latestOnly();
  const load = async (nextToken) => {
    const current = begin();
    const page = await get('/api/workspaces', { nextToken });
    if (!current()) return; // an older load answered after a newer one
    items = nextToken ? items.concat(page.items) : page.items;
    clear(body, table([
      { label: 'Workspace', cell: (w) => h('a', { href: `#/memory/workspace/${id(w.id)}` }, w.name) },
      { label: 'Description', cell: (w) => w.description || '—' },
      { label: 'Updated', cell: (w) => fmtTime(w.updatedAt) },
      { label: '', cell: (w) => actions(w, load) },
    ], items, { empty: 'No workspaces yet. A workspace holds memory its agents share.' }));
    clear(more, moreButton(page.nextToken, load));
  };
  const name = h('input', { name: 'name', required: true, maxlength: 100 });
  const description = h('input', { name: 'description', maxlength: 1000 });
  const form = h('form', { class: 'card' }, h('h2', { text: 'New workspace' }), h('div', { class: 'form-error' }),
    h('div', { class: 'inline-fields' }, field('Name', name), field('Description', description)),
    h('button', { type: 'submit' }, 'Create workspace'));
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    try {
      await post('/api/workspaces', { name: name.value.trim(), description: description.value.trim() });
      name.value = ''; description.value = '';
      await load();
    } catch (err) {
      showFormError(form, err);
    }
  });
  clear(main, h('h1', { text: 'Workspaces' }), body, more, form);
  await load();
}

function actions(w, reload) {
  const rename = h('button', { type: 'button', class: 'small secondary' }, 'Edit');
  rename.addEventListener('click', async () => {
    const name = h('input', { name: 'name', value: w.name, maxlength: 100 });
    const description = h('input', { name: 'description', value: w.description || '', maxlength: 1000 });
    const form = h('form', {}, h('div', { class: 'form-error' }), field('Name', name), field('Description', description));
    for (;;) {
      const ok = await dialog({ title: `Edit ${w.name}`, body: form, actions: [{ label: 'Cancel', value: false }, { label: 'Save', value: true }] });
      if (!ok) return;
      try {
        await patch(`/api/workspaces/${id(w.id)}`, { name: name.value.trim(), description: description.value.trim() });
        await reload();
        return;
      } catch (err) {
        showFormError(form, err);
      }
    }
  });
  const remove = h('button', { type: 'button', class: 'small danger' }, 'Delete');
  remove.addEventListener('click', async () => {
    // An agent still in the workspace stops the deletion: say which, before asking anything.
    const users = await busy(remove, async () => (await all('/api/agents')).filter((a) => a.workspaceId === w.id));
    if (users === undefined) return;
    if (users.length) {
      await dialog({
        title: `${w.name} is still in use`,
        body: [h('p', { text: `Used by ${users.length === 1 ? 'the agent' : `${users.length} agents:`} ${users.map((a) => a.name).join(', ')}. Move ${users.length === 1 ? 'it' : 'them'} to another workspace (Edit on the agent's page) or delete ${users.length === 1 ? 'it' : 'them'} first.` }),
          h('ul', { class: 'workspace-users' }, users.map((a) => h('li', {}, h('a', { href: `#/agents/${id(a.id)}`, onclick: () => document.querySelector('dialog.dialog')?.close() }, a.name))))],
        actions: [{ label: 'Close', value: null }],
      });
      return;
    }
    if (!(await confirmAction(`Delete the workspace ${w.name} and its memory?`))) return;
    await busy(remove, async () => { await del(`/api/workspaces/${id(w.id)}`); await reload(); });
  });
  return h('div', { class: 'row-actions' }, rename, remove);
}
