// Stored offsets of one consumer (by id or name) on a topic: view, store, delete.

import { h, table, link, button, form, field, input, select, attempt } from '../dom.js';
import { seg, topicPath } from '../api.js';

export async function render(ctx, [sid, tid]) {
  const path = topicPath(sid, tid);
  const [stream, topic] = await Promise.all([ctx.api.get(`/streams/${seg(sid)}`), ctx.api.get(path)]);
  const result = h('div', { id: 'offsets' });
  const show = async (kind, consumer) => {
    const rows = await Promise.all(topic.partitions.map(async p => {
      const q = new URLSearchParams({ consumer_kind: kind, consumer_id: consumer, partition_id: String(p.id) });
      try {
        const o = await ctx.api.get(`${path}/consumer-offsets?${q}`);
        return { id: p.id, current: p.current_offset, stored: o ? o.stored_offset : null };
      } catch (err) {
        if (err.status === 404) return { id: p.id, current: p.current_offset, stored: null };
        throw err;
      }
    }));
    const canDelete = kind === 'consumer' && ctx.caps.poll(sid, tid);
    result.replaceChildren(table([
      { title: 'Partition', cell: r => r.id }, { title: 'Current offset', cell: r => r.current },
      { title: 'Stored offset', cell: r => (r.stored === null ? 'none' : r.stored) },
      { title: '', cell: r => canDelete && r.stored !== null && button('Delete', async () => {
        const q = new URLSearchParams({ partition_id: String(r.id) });
        await attempt(() => ctx.api.del(`${path}/consumer-offsets/${seg(consumer)}?${q}`), 'Offset deleted');
        await show(kind, consumer);
      }, { class: 'danger', 'data-action': 'delete' }) },
    ], rows));
  };
  const lookup = form({ id: 'offsets-form', class: 'form inline' }, [
    field('Consumer kind', select('kind', ['consumer', 'consumer_group'], 'consumer')),
    field('Consumer id or name', input('consumer', { required: true, value: '1' })),
    h('button', { type: 'submit' }, 'Show offsets')],
  v => show(v.kind, v.consumer));
  const store = ctx.caps.poll(sid, tid) && form({ id: 'store-offset' }, [
    h('h2', null, 'Store an offset (consumer)'),
    field('Consumer id or name', input('consumer', { required: true, value: '1' })),
    field('Partition', select('partition', topic.partitions.map(p => String(p.id)), topic.partitions.length ? String(topic.partitions[0].id) : '')),
    field('Offset', input('offset', { type: 'number', min: 0, required: true })),
    h('button', { type: 'submit' }, 'Store')],
  async v => {
    await ctx.api.put(`${path}/consumer-offsets`, { consumer_id: v.consumer, partition_id: Number(v.partition), offset: Number(v.offset) });
    await show('consumer', v.consumer);
  });
  return h('div', null,
    h('p', { class: 'crumbs' }, link('#/streams', 'Streams'), ' / ', link(`#/streams/${sid}`, stream.name), ' / ',
      link(`#/streams/${sid}/topics/${tid}`, topic.name), ' / consumer offsets'),
    h('h1', null, 'Consumer offsets of ', topic.name), lookup, result, store);
}
