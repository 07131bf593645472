// The collections the token may read (GET /v1/collections): name (else id), task, ε, reports,
// creation time. Every server-provided string is set as text, never parsed as markup.
import { el } from '../format.js';
import { listCollections } from '../api.js';

export async function render(main, { onError }) {
  let list;
  try { list = await listCollections(); } catch (e) { return onError(e); }
  const rows = list.map((c) => el('tr', {},
    el('th', { scope: 'row' }, el('a', { href: `#/c/${encodeURIComponent(c.id)}`, class: 'collection-link', text: c.name ?? c.id }),
      c.name ? el('div', { class: 'note id', text: c.id }) : null,
      c.description ? el('div', { class: 'note description', text: c.description }) : null),
    el('td', { text: c.task }), el('td', { class: 'num', text: String(c.epsilon) }),
    el('td', { class: 'num', text: c.reports.toLocaleString('en') }),
    el('td', { class: 'num', text: c.created ? c.created.replace('T', ' ').replace('Z', ' UTC') : '—' }),
    el('td', {}, el('a', { href: `playground.html?collection=${encodeURIComponent(c.id)}`, text: 'playground' }))));
  main.replaceChildren(el('section', { id: 'collections', 'aria-labelledby': 'collections-h' },
    el('h2', { id: 'collections-h', text: `Collections (${list.length})` }),
    list.length ? el('table', { class: 'numbers' },
      el('caption', { text: 'Every collection this token may read' }),
      el('thead', {}, el('tr', {}, ['collection', 'task', 'ε', 'reports', 'created', 'devices'].map((h) => el('th', { scope: 'col', text: h })))),
      el('tbody', {}, rows)) : el('p', { text: 'No collections yet.' }),
    el('p', {}, el('a', { href: '#/new', class: 'button', text: 'Create a collection' }))));
}
