// Create a collection: POST /v1/collections with {name, description, schema, epsilon, task}, built from a few fields
// (the schema and the task's options as JSON) or pasted whole. A 4xx shows the server's field
// and message.
import { el } from '../format.js';
import { createCollection } from '../api.js';

const EXAMPLE_SCHEMA = [
  { name: 'age', kind: 'numeric', min: 17, max: 90 },
  { name: 'sex', kind: 'categorical', categories: ['Female', 'Male'] },
  { name: 'education', kind: 'categorical', categories: ['HS-grad', 'Some-college', 'Bachelors', 'Masters', 'Doctorate'] },
];
const TASKS = ['means', 'frequency', 'range', 'range2d', 'heavy-hitters', 'marginals', 'linear-queries', 'train'];

export function render(main, { created }) {
  const field = (id, label, input, help) => el('div', { class: 'field' }, el('label', { for: id, text: label }), input,
    help ? el('p', { class: 'help', id: `${id}-help`, text: help }) : null);
  const schema = el('textarea', { id: 'schema', name: 'schema', rows: 8, 'aria-describedby': 'schema-help', spellcheck: 'false' });
  schema.value = JSON.stringify(EXAMPLE_SCHEMA, null, 1);
  const epsilon = el('input', { id: 'epsilon', name: 'epsilon', type: 'number', step: 'any', min: '0', value: '2', required: true });
  const kind = el('select', { id: 'kind', name: 'kind' }, TASKS.map((t) => el('option', { value: t, text: t })));
  const options = el('textarea', { id: 'options', name: 'options', rows: 3, 'aria-describedby': 'options-help', spellcheck: 'false' });
  options.value = '{}';
  const raw = el('textarea', { id: 'raw', name: 'raw', rows: 6, 'aria-describedby': 'raw-help', spellcheck: 'false' });
  const name = el('input', { id: 'name', name: 'name', maxlength: '128', placeholder: 'e.g. Adult incomes, pilot' });
  const description = el('textarea', { id: 'description', name: 'description', rows: 2, maxlength: '2000' });
  const msg = el('p', { id: 'create-error', class: 'error', role: 'alert' });
  const form = el('form', { id: 'create' },
    el('h2', { text: 'Create a collection' }),
    field('name', 'Name (optional; shown in the list)', name),
    field('description', 'Description (optional)', description),
    field('schema', 'Schema (JSON list of attributes)', schema, 'Each attribute: {"name", "kind": "numeric", "min", "max"} or {"name", "kind": "categorical", "categories": [...]}. Heavy-hitters devices report items (strings); the schema is still required.'),
    field('epsilon', 'ε (each device\'s budget for its report)', epsilon),
    field('kind', 'Task', kind),
    field('options', 'Task options (JSON object)', options, 'E.g. {"attribute": "education"} for frequency or range, {"x": "age", "y": "hours"} for range2d, {"attributes": ["sex", "education"]} for marginals; see docs/SERVER.md "Tasks".'),
    field('raw', 'Or paste the whole request body (used when not empty)', raw, '{"schema": [...], "epsilon": 2, "task": {"kind": "means"}}'),
    el('button', { type: 'submit', text: 'Create' }), msg);
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    msg.textContent = '';
    let body;
    try {
      body = raw.value.trim() ? JSON.parse(raw.value)
        : { schema: JSON.parse(schema.value), epsilon: Number(epsilon.value), task: { kind: kind.value, ...JSON.parse(options.value || '{}') } };
    } catch (err) {
      msg.textContent = `not JSON: ${err.message}`;
      return;
    }
    // The form's name and description, unless the pasted body has its own.
    if (name.value.trim() && body.name === undefined) body.name = name.value.trim();
    if (description.value.trim() && body.description === undefined) body.description = description.value.trim();
    try {
      const out = await createCollection(body);
      created(out.id);
    } catch (err) {
      msg.textContent = `${err.status ? `${err.status} ` : ''}${err.field ? `${err.field}: ` : ''}${err.serverMessage ?? err.message}`;
    }
  });
  main.replaceChildren(form);
}
