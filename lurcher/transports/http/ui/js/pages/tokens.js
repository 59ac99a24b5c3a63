// Personal access tokens of the signed-in user: list, create (the token is shown once),
// delete.

import { h, table, button, form, field, input } from '../dom.js';
import { seg } from '../api.js';
import { micros } from '../format.js';
import { dangerous } from './streams.js';

export async function render(ctx) {
  const created = h('div', { id: 'created-token' });
  const listBox = h('div', { id: 'tokens' });
  const refresh = async () => listBox.replaceChildren(tokensTable(ctx, await ctx.api.get('/personal-access-tokens')));
  await refresh();
  const create = form({ id: 'create-token' }, [
    h('h2', null, 'New token'),
    field('Name', input('name', { required: true })),
    field('Expires after (s, 0 = never)', input('expiry', { type: 'number', min: 0, value: '0' })),
    h('button', { type: 'submit' }, 'Create token')],
  async (v, el) => {
    // the API's expiry is in microseconds (as Iggy's), the field in seconds
    const reply = await ctx.api.post('/personal-access-tokens', { name: v.name, expiry: Math.round(Number(v.expiry) * 1e6) });
    el.reset();
    created.replaceChildren(h('div', { class: 'notice' },
      h('p', null, 'Copy this token now: it is shown only once and cannot be read again.'),
      h('code', { id: 'new-token' }, reply.token)));
    await refresh();
  });
  return h('div', null, h('h1', null, 'Personal access tokens'), created, listBox, create);
}

function tokensTable(ctx, tokens) {
  return table([
    { title: 'Name', cell: t => t.name },
    { title: 'Expires', cell: t => (t.expiry_at ? micros(t.expiry_at) : 'never') },
    { title: '', cell: t => button('Delete', () => dangerous(ctx, `Delete token "${t.name}"?`, 'Delete',
      () => ctx.api.del(`/personal-access-tokens/${seg(t.name)}`)), { class: 'danger', 'data-action': 'delete' }) },
  ], tokens, { id: 'tokens-table' });
}
