// Consumer groups of one topic: members with their partitions and, per partition, the
// group's stored offset and lag (partition current offset minus stored offset).

import { h, table, link, button, form, field, input } from '../dom.js';
import { seg, topicPath } from '../api.js';
import { dangerous } from './streams.js';

export async function render(ctx, [sid, tid]) {
  const path = topicPath(sid, tid);
  const [stream, topic, groups] = await Promise.all([ctx.api.get(`/streams/${seg(sid)}`), ctx.api.get(path),
    ctx.api.get(`${path}/consumer-groups`)]);
  const manage = ctx.caps.manageTopic(sid, tid);
  const sections = await Promise.all(groups.map(g => groupSection(ctx, path, topic, g, manage)));
  const create = manage && form({ id: 'create-group' }, [field('New consumer group', input('name', { required: true })),
    h('button', { type: 'submit' }, 'Create group')],
  async v => { await ctx.api.post(`${path}/consumer-groups`, { name: v.name }); ctx.go(location.hash); });
  return h('div', null,
    h('p', { class: 'crumbs' }, link('#/streams', 'Streams'), ' / ', link(`#/streams/${sid}`, stream.name), ' / ',
      link(`#/streams/${sid}/topics/${tid}`, topic.name), ' / consumer groups'),
    h('h1', null, 'Consumer groups of ', topic.name),
    groups.length ? sections : h('p', { class: 'muted' }, 'No consumer groups.'), create);
}

async function groupSection(ctx, path, topic, group, manage) {
  const details = await ctx.api.get(`${path}/consumer-groups/${seg(group.id)}`);
  const rows = await Promise.all(topic.partitions.map(p => lagRow(ctx, path, group, p)));
  const owner = new Map();
  for (const m of details.members) for (const pid of m.partitions) owner.set(pid, m.id);
  return h('section', { class: 'group', dataset: { group: group.name } },
    h('h2', null, `${group.name} (id ${group.id})`,
      manage && button('Delete', () => dangerous(ctx, `Delete consumer group "${group.name}"?`, 'Delete',
        () => ctx.api.del(`${path}/consumer-groups/${seg(group.id)}`)), { class: 'danger', 'data-action': 'delete' })),
    h('h3', null, `Members (${details.members_count})`),
    table([{ title: 'Client', cell: m => m.id }, { title: 'Partitions', cell: m => m.partitions.join(', ') || '—' }],
      details.members),
    h('h3', null, 'Lag per partition'),
    table([
      { title: 'Partition', cell: r => r.id },
      { title: 'Member', cell: r => (owner.has(r.id) ? owner.get(r.id) : '—') },
      { title: 'Current offset', cell: r => (r.messages ? r.current : '—') },
      { title: 'Stored offset', cell: r => (r.stored === null ? 'none' : r.stored) },
      { title: 'Lag', cell: r => h('span', { class: 'lag', dataset: { partition: String(r.id) } }, String(r.lag)) },
    ], rows, { class: 'lag-table' }));
}

async function lagRow(ctx, path, group, partition) {
  const q = new URLSearchParams({ consumer_kind: 'consumer_group', consumer_id: String(group.id), partition_id: String(partition.id) });
  let stored = null;
  try {
    const offset = await ctx.api.get(`${path}/consumer-offsets?${q}`);
    stored = offset ? offset.stored_offset : null;
  } catch (err) {
    if (err.status !== 404) throw err;
  }
  const current = partition.current_offset;
  const messages = partition.messages_count;
  const lag = !messages ? 0 : stored === null ? current + 1 : Math.max(0, current - stored);
  return { id: partition.id, current, messages, stored, lag };
}
