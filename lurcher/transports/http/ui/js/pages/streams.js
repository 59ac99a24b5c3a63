// Streams: list, create, rename, purge, delete (with confirmation).

import { h, table, link, button, form, field, input, confirmAction, attempt, shown } from '../dom.js';
import { seg } from '../api.js';
import { bytes, micros, parseSize } from '../format.js';

export async function render(ctx) {
  const streams = await ctx.api.get('/streams');
  const caps = ctx.caps;
  const actions = s => [
    caps.manageStream(s.id) && button('Rename', () => rename(ctx, s), { class: 'secondary', 'data-action': 'rename' }),
    caps.manageStream(s.id) && button('Purge', () => dangerous(ctx, `Purge every message of stream "${s.name}"?`, 'Purge',
      () => ctx.api.del(`/streams/${seg(s.id)}/purge`)), { class: 'secondary', 'data-action': 'purge' }),
    caps.manageStream(s.id) && button('Delete', () => dangerous(ctx, `Delete stream "${s.name}" and all its topics?`, 'Delete',
      () => ctx.api.del(`/streams/${seg(s.id)}`)), { class: 'danger', 'data-action': 'delete' }),
  ];
  const list = table([
    { title: 'ID', cell: s => s.id },
    { title: 'Name', cell: s => link(`#/streams/${s.id}`, s.name) },
    { title: 'Topics', cell: s => s.topics_count },
    { title: 'Messages', cell: s => s.messages_count },
    { title: 'Size', cell: s => bytes(parseSize(s.size)) },
    { title: 'Created', cell: s => micros(s.created_at) },
    { title: '', cell: s => h('span', { class: 'row-actions' }, actions(s)) },
  ], streams, { id: 'streams-table' });
  const create = caps.createStream && form({ id: 'create-stream' }, [
    field('New stream name', input('name', { required: true, id: 'stream-name' })),
    h('button', { type: 'submit' }, 'Create stream')],
  async v => { await ctx.api.post('/streams', { name: v.name }); ctx.go('#/streams'); });
  return h('div', null, h('h1', null, 'Streams'), list, create);
}

export async function dangerous(ctx, question, action, run) {
  if (!(await confirmAction(question, action))) return;
  if ((await attempt(run, `${action}: done`)) !== undefined) ctx.go(location.hash);
}

async function rename(ctx, s) {
  const name = prompt(`New name for stream "${shown(s.name)}"`, s.name);
  if (!name || name === s.name) return;
  await attempt(() => ctx.api.put(`/streams/${seg(s.id)}`, { name }), 'Renamed');
  ctx.go(location.hash);
}
