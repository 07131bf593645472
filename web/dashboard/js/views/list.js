// The collections the token may read (GET /v1/collections): id, task, ε, reports.
import { el } from '../format.js';
import { listCollections } from '../api.js';

export async function render(main, { onError }) {
  let list;
  try { list = await listCollections(); } catch (e) { return onError(e); }
  const rows = list.map((c) => el('tr', {},
    el('th', { scope: 'row' }, el('a', { href: `#/c/${encodeURIComponent(c.id)}`, class: 'collection-link', text: c.id })),
    el('td', { text: c.task }), el('td', { class: 'num', text: String(c.epsilon) }),
    el('td', { class: 'num', text: c.reports.toLocaleString('en') }),
    el('td', {}, el('a', { href: `playground.html?collection=${encodeURIComponent(c.id)}`, text: 'playground' }))));
  main.replaceChildren(el('section', { id: 'collections', 'aria-labelledby': 'collections-h' },
    el('h2', { id: 'collections-h', text: `Collections (${list.length})` }),
    list.length ? el('table', { class: 'numbers' },
      el('caption', { text: 'Every collection this token may read' }),
      el('thead', {}, el('tr', {}, ['id', 'task', 'ε', 'reports', 'devices'].map((h) => el('th', { scope: 'col', text: h })))),
      el('tbody', {}, rows)) : el('p', { text: 'No collections yet.' }),
    el('p', {}, el('a', { href: '#/new', class: 'button', text: 'Create a collection' }))));
}
