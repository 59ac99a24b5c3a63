// Connected clients: id, address, transport, user, consumer groups.

import { h, table } from '../dom.js';

export async function render(ctx) {
  const clients = await ctx.api.get('/clients');
  const names = new Map();
  if (ctx.caps.readUsers) for (const u of await ctx.api.get('/users')) names.set(u.id, u.username);
  const user = id => (id === null || id === undefined ? 'not signed in' : names.get(id) || `user ${id}`);
  return h('div', null, h('h1', null, 'Clients'), table([
    { title: 'Client', cell: c => c.client_id }, { title: 'Address', cell: c => c.address },
    { title: 'Transport', cell: c => c.transport }, { title: 'User', cell: c => user(c.user_id) },
    { title: 'Consumer groups', cell: c => c.consumer_groups_count },
  ], clients, { id: 'clients-table' }));
}
