// Topics of one stream: list with their settings, create, edit, purge, delete.

import { h, table, link, button, form, field, input, select } from '../dom.js';
import { seg, topicPath } from '../api.js';
import { bytes, expiry, maxSize, micros, neverJson, parseSize } from '../format.js';
import { dangerous } from './streams.js';

export async function render(ctx, [sid]) {
  const stream = await ctx.api.get(`/streams/${seg(sid)}`);
  const caps = ctx.caps;
  const editor = h('div', { id: 'topic-editor' });
  const actions = t => caps.manageTopic(sid, t.id) && [
    button('Edit', () => editor.replaceChildren(topicForm(ctx, sid, t)), { class: 'secondary', 'data-action': 'edit' }),
    button('Purge', () => dangerous(ctx, `Purge every message of topic "${t.name}"?`, 'Purge',
      () => ctx.api.del(`${topicPath(sid, t.id)}/purge`)), { class: 'secondary', 'data-action': 'purge' }),
    button('Delete', () => dangerous(ctx, `Delete topic "${t.name}"?`, 'Delete',
      () => ctx.api.del(topicPath(sid, t.id))), { class: 'danger', 'data-action': 'delete' }),
  ];
  const list = table([
    { title: 'ID', cell: t => t.id },
    { title: 'Name', cell: t => link(`#/streams/${sid}/topics/${t.id}`, t.name) },
    { title: 'Partitions', cell: t => t.partitions_count },
    { title: 'Messages', cell: t => t.messages_count },
    { title: 'Size', cell: t => bytes(parseSize(t.size)) },
    { title: 'Expiry', cell: t => expiry(t.message_expiry) },
    { title: 'Max size', cell: t => maxSize(t.max_topic_size) },
    { title: 'Compression', cell: t => t.compression_algorithm },
    { title: 'Replication', cell: t => t.replication_factor },
    { title: 'Created', cell: t => micros(t.created_at) },
    { title: '', cell: t => h('span', { class: 'row-actions' }, actions(t)) },
  ], stream.topics, { id: 'topics-table' });
  return h('div', null, h('p', { class: 'crumbs' }, link('#/streams', 'Streams'), ' / ', stream.name),
    h('h1', null, 'Topics of ', h('span', { id: 'stream-title' }, stream.name)), list, editor,
    caps.createTopic(sid) && topicForm(ctx, sid, null));
}

// The form's 0 (never, unlimited) is sent as u64::MAX: the API's 0 is the server's default,
// so with system.topic.message_expiry = "7 days" a topic created, or only renamed, with
// "0 = never" got 7 days and lost its messages.
function expiryMicros(secondsText) {
  const seconds = Number(secondsText);
  return seconds ? Math.round(seconds * 1e6) : neverJson();
}

function maxSizeValue(text) {
  if (/^\s*0*\s*$/.test(text)) return neverJson();
  return /^\d+$/.test(text) ? Number(text) : text;
}

// Create (topic null) or edit form. Expiry is entered in seconds (0: never).
function topicForm(ctx, sid, topic) {
  const secs = topic && topic.message_expiry && topic.message_expiry < 1.8e19 ? Math.round(topic.message_expiry / 1e6) : 0;
  const size = topic ? parseSize(topic.max_topic_size) : 0;
  return form({ id: topic ? 'edit-topic' : 'create-topic' }, [
    h('h2', null, topic ? `Edit topic ${topic.name}` : 'New topic'),
    field('Name', input('name', { required: true, value: topic ? topic.name : '', id: 'topic-name' })),
    !topic && field('Partitions', input('partitions_count', { type: 'number', min: 0, value: '1', id: 'topic-partitions' })),
    field('Compression', select('compression_algorithm', ['none', 'gzip'], topic ? topic.compression_algorithm : 'none')),
    field('Message expiry (s, 0 = never)', input('expiry', { type: 'number', min: 0, value: String(secs) })),
    field('Max size (bytes or "1 GB", 0 = unlimited)', input('max_topic_size', { value: size && size < 1.8e19 ? String(size) : '0' })),
    field('Replication factor (0 = server default)', input('replication_factor', { type: 'number', min: 0, value: String(topic ? topic.replication_factor || 0 : 0) })),
    h('button', { type: 'submit' }, topic ? 'Save topic' : 'Create topic')],
  async v => {
    const body = { name: v.name, compression_algorithm: v.compression_algorithm,
      message_expiry: expiryMicros(v.expiry), max_topic_size: maxSizeValue(v.max_topic_size),
      replication_factor: Number(v.replication_factor) || null };  // 0: the server's
    if (topic) await ctx.api.put(topicPath(sid, topic.id), body);
    else await ctx.api.post(`/streams/${seg(sid)}/topics`, { ...body, partitions_count: Number(v.partitions_count) });
    ctx.go(`#/streams/${sid}`);
  });
}
