// The form a tool's JSON Schema generates (docs/console.md, "Tools"): a
// control per scalar argument, a <fieldset> with a <legend> per object,
// and per array of objects a fieldset of items with buttons to add and
// remove one. Anything else (an array of scalars, a map, a union, a level
// past MAX_DEPTH) is a JSON text box. Every control has a label, and the
// same tree reads the values back into the call's arguments.
//
// The schema is the plugin's, so it is bounded here: local `$ref`s only,
// followed at most MAX_REF_HOPS at a time, MAX_DEPTH levels of fieldsets
// and MAX_CONTROLS controls per form; past a bound a value is a JSON box.

import { el } from './dom.js';

/** Levels of nested fieldsets; deeper values are JSON boxes. */
const MAX_DEPTH = 6;
/** Controls one form draws; later values are JSON boxes. */
const MAX_CONTROLS = 300;
/** `$ref`s followed in a row before a schema counts as unresolved. */
const MAX_REF_HOPS = 16;
/** Items one array fieldset holds. */
const MAX_ITEMS = 100;

let serial = 0;
const newId = () => `field-${(serial += 1)}`;

/**
 * The schema `$ref` chains lead to (local JSON pointers only), with the
 * keys written beside each `$ref` (a description, a default) over the
 * target's; `{}` when a chain does not resolve.
 */
function resolve(schema, root) {
  let current = schema;
  let beside = {};
  for (let hops = 0; current && typeof current === 'object' && typeof current.$ref === 'string'; hops += 1) {
    if (hops >= MAX_REF_HOPS || !current.$ref.startsWith('#')) return {};
    const { $ref: reference, ...rest } = current;
    beside = { ...rest, ...beside };
    let target = root;
    const pointer = reference.slice(1);
    for (const raw of pointer === '' ? [] : pointer.slice(1).split('/')) {
      let key;
      try { key = decodeURIComponent(raw).replaceAll('~1', '/').replaceAll('~0', '~'); } catch { return {}; }
      target = target && typeof target === 'object' && Object.hasOwn(target, key) ? target[key] : undefined;
    }
    current = target;
  }
  return current && typeof current === 'object' && !Array.isArray(current) ? { ...current, ...beside } : {};
}

/**
 * `schema` resolved, and a nullable union (`anyOf: [T, {type: null}]`, what
 * `Option<T>` gives) or type list taken as its `T`, marked `nullable`.
 */
function shape(schema, root) {
  const s = resolve(schema, root);
  const union = s.anyOf || s.oneOf;
  if (Array.isArray(union)) {
    const others = union.filter((b) => resolve(b, root).type !== 'null');
    if (others.length === 1 && others.length < union.length) {
      const { anyOf: _a, oneOf: _o, ...beside } = s;
      return { ...resolve(others[0], root), ...beside, nullable: true };
    }
  }
  if (Array.isArray(s.type)) {
    const others = s.type.filter((t) => t !== 'null');
    if (others.length === 1) return { ...s, type: others[0], nullable: others.length < s.type.length };
  }
  return s;
}

const isObject = (s) => s.type === 'object' && s.properties && typeof s.properties === 'object';

/** A control's label: its name, `(required)`, and the schema's description. */
function labelFor(id, name, required, schema) {
  return el('label', { for: id }, `${name}${required ? ' (required)' : ''}`,
    schema.description ? el('span', { class: 'field-description' }, ` — ${schema.description}`) : null);
}

/**
 * A scalar or JSON control: { element, read, isEmpty }, where read() gives
 * the value or undefined when unset, and isEmpty() says whether it still
 * holds what it was drawn with (nothing, or the schema's default).
 */
function leaf(schema, name, required, path) {
  const id = newId();
  // A default of null means "absent": the box starts empty (never the text
  // `null`), and an empty box is not sent.
  const prefill = schema.default !== undefined && schema.default !== null;
  let input;
  let read;
  const choices = Array.isArray(schema.enum) ? schema.enum : schema.const !== undefined ? [schema.const] : null;
  if (choices) {
    input = el('select', { id }, el('option', { value: '' }, '(unset)'),
      choices.map((v) => el('option', { value: JSON.stringify(v) }, JSON.stringify(v))));
    if (prefill) input.value = JSON.stringify(schema.default);
    read = () => (input.value === '' ? undefined : JSON.parse(input.value));
  } else if (schema.type === 'boolean') {
    // A select, not a checkbox: an optional flag can be left out.
    input = el('select', { id }, el('option', { value: '' }, '(unset)'), el('option', { value: 'true' }, 'true'), el('option', { value: 'false' }, 'false'));
    if (prefill) input.value = String(schema.default);
    read = () => (input.value === '' ? undefined : input.value === 'true');
  } else if (schema.type === 'integer' || schema.type === 'number') {
    input = el('input', { id, type: 'number', step: schema.type === 'integer' ? '1' : 'any', min: schema.minimum, max: schema.maximum });
    if (prefill) input.value = String(schema.default);
    read = () => (input.value === '' ? undefined : Number(input.value));
  } else if (schema.type === 'string') {
    input = el('input', { id, type: 'text', maxlength: schema.maxLength, spellcheck: 'false' });
    if (prefill) input.value = String(schema.default);
    read = () => (input.value === '' ? undefined : input.value);
  } else {
    input = el('textarea', { id, rows: 2, placeholder: 'JSON', spellcheck: 'false' });
    if (prefill) input.value = JSON.stringify(schema.default);
    read = () => {
      if (input.value.trim() === '') return undefined;
      try { return JSON.parse(input.value); } catch (e) { throw new Error(`${path} is not JSON: ${e.message}`); }
    };
  }
  const initial = input.value;
  const isEmpty = () => input.value === '' || input.value === initial;
  return { element: el('div', { class: 'field' }, labelFor(id, name, required, schema), input), read, isEmpty };
}

/**
 * The field of one value: a fieldset for an object or an array of objects,
 * else a leaf. A required value that may be null (a strict tool's optional
 * argument) is sent as null when left unset.
 */
function field(rawSchema, root, name, required, path, depth, budget) {
  const schema = shape(rawSchema, root);
  if (!required || !schema.nullable) return drawn(schema, root, name, required, path, depth, budget);
  const node = drawn(schema, root, name, false, path, depth, budget);
  const read = node.read;
  return { ...node, read: () => read() ?? null };
}

function drawn(schema, root, name, required, path, depth, budget) {
  budget.controls += 1;
  const deep = depth >= MAX_DEPTH || budget.controls > MAX_CONTROLS;
  if (!deep && isObject(schema)) return objectField(schema, root, name, required, path, depth, budget);
  const items = schema.type === 'array' ? shape(schema.items, root) : null;
  if (!deep && depth + 1 < MAX_DEPTH && items && isObject(items)) return arrayField(schema, root, name, required, path, depth, budget);
  return leaf(schema, name, required, path);
}

function objectField(schema, root, name, required, path, depth, budget) {
  const needed = new Set(Array.isArray(schema.required) ? schema.required : []);
  const children = Object.entries(schema.properties).map(([key, sub]) =>
    [key, field(sub, root, key, needed.has(key), `${path}.${key}`, depth + 1, budget)]);
  const element = el('fieldset', { class: 'object' }, el('legend', {}, `${name}${required ? ' (required)' : ''}`),
    schema.description ? el('p', { class: 'note' }, schema.description) : null,
    children.map(([, c]) => c.element));
  const isEmpty = () => children.every(([, c]) => c.isEmpty());
  // An optional object is sent once one of its fields was filled in.
  const read = () => {
    if (!required && isEmpty()) return undefined;
    const value = {};
    for (const [key, c] of children) {
      const v = c.read();
      if (v !== undefined) value[key] = v;
    }
    return value;
  };
  return { element, read, isEmpty };
}

function arrayField(schema, root, name, required, path, depth, budget) {
  const itemSchema = schema.items;
  const list = el('ol', { class: 'items' });
  const items = [];
  const add = el('button', { type: 'button', class: 'secondary' }, `Add ${name} item`);
  const element = el('fieldset', { class: 'array' }, el('legend', {}, `${name}${required ? ' (required)' : ''}`),
    schema.description ? el('p', { class: 'note' }, schema.description) : null, list, add);
  const renumber = () => items.forEach((item, i) => {
    if (item.legend) item.legend.textContent = `${name} item ${i + 1}`;
    item.remove.textContent = `Remove ${name} item ${i + 1}`;
  });
  add.addEventListener('click', () => {
    if (items.length >= MAX_ITEMS) return;
    const inner = field(itemSchema, root, `${name} item`, true, `${path}[${items.length}]`, depth + 1, budget);
    const legend = inner.element.querySelector('legend');
    const remove = el('button', { type: 'button', class: 'secondary' });
    const entry = el('li', {}, inner.element, remove);
    const item = { read: inner.read, legend, remove, entry };
    if (!legend) inner.element.prepend(el('p', { class: 'note' }, `${name} item`));
    remove.addEventListener('click', () => {
      items.splice(items.indexOf(item), 1);
      entry.remove();
      renumber();
      add.focus();
    });
    items.push(item);
    list.append(entry);
    renumber();
    add.disabled = items.length >= MAX_ITEMS;
    inner.element.querySelector('input, select, textarea')?.focus();
  });
  const read = () => {
    if (items.length === 0 && !required) return undefined;
    return items.map((item) => item.read() ?? {});
  };
  return { element, read, isEmpty: () => items.length === 0 };
}

/**
 * The fields of a tool's `parameters`: `{ element, read }`, where read()
 * gives the call's arguments object (and throws, naming the field, on a
 * JSON box that does not parse).
 */
export function schemaForm(parameters) {
  const root = parameters && typeof parameters === 'object' ? parameters : {};
  const schema = shape(root, root);
  if (!isObject(schema) || Object.keys(schema.properties).length === 0) {
    return { element: el('p', { class: 'note' }, 'No arguments.'), read: () => ({}) };
  }
  const needed = new Set(Array.isArray(schema.required) ? schema.required : []);
  const budget = { controls: 0 };
  const children = Object.entries(schema.properties).map(([key, sub]) => [key, field(sub, root, key, needed.has(key), key, 0, budget)]);
  const read = () => {
    const args = {};
    for (const [key, c] of children) {
      const v = c.read();
      if (v !== undefined) args[key] = v;
    }
    return args;
  };
  return { element: el('div', { class: 'fields' }, children.map(([, c]) => c.element)), read };
}
