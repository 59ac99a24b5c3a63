// One topic: its partitions (add, delete the last ones) and links to messages, consumer
// groups and consumer offsets.

import { h, table, link, button, form, field, input } from '../dom.js';
import { seg, topicPath } from '../api.js';
import { bytes, micros, parseSize } from '../format.js';
import { dangerous } from './streams.js';

export async function render(ctx, [sid, tid]) {
  const [stream, topic] = await Promise.all([ctx.api.get(`/streams/${seg(sid)}`), ctx.api.get(topicPath(sid, tid))]);
  const base = `#/streams/${sid}/topics/${tid}`;
  const manage = ctx.caps.manageTopic(sid, tid);
  const list = table([
    { title: 'Partition', cell: p => p.id },
    { title: 'Messages', cell: p => p.messages_count },
    { title: 'Current offset', cell: p => p.current_offset },
    { title: 'Segments', cell: p => p.segments_count },
    { title: 'Size', cell: p => bytes(parseSize(p.size)) },
    { title: 'Created', cell: p => micros(p.created_at) },
  ], topic.partitions, { id: 'partitions-table' });
  const manageForms = manage && h('div', { class: 'inline-forms' },
    form({ id: 'add-partitions' }, [field('Add partitions', input('count', { type: 'number', min: 1, value: '1' })),
      h('button', { type: 'submit' }, 'Add')],
    async v => { await ctx.api.post(`${topicPath(sid, tid)}/partitions`, { partitions_count: Number(v.count) }); ctx.go(location.hash); }),
    button('Delete last partition', () => dangerous(ctx, `Delete the last partition of "${topic.name}" and its messages?`, 'Delete',
      () => ctx.api.del(`${topicPath(sid, tid)}/partitions?partitions_count=1`)), { class: 'danger', 'data-action': 'delete-partition' }));
  return h('div', null,
    h('p', { class: 'crumbs' }, link('#/streams', 'Streams'), ' / ', link(`#/streams/${sid}`, stream.name), ' / ', topic.name),
    h('h1', null, 'Topic ', h('span', { id: 'topic-title' }, topic.name)),
    h('p', { class: 'tabs' }, link(`${base}/messages`, 'Messages'), link(`${base}/groups`, 'Consumer groups'),
      link(`${base}/offsets`, 'Consumer offsets')),
    list, manageForms);
}
