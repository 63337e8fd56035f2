/** Builds elements without HTML strings: text is always text, never markup. */
type Child = Node | string | number | null | undefined | false;
type Props = Record<string, string | number | boolean | null | undefined | EventListener>;

export function h(tag: string, props: Props = {}, ...children: Array<Child | Child[]>): HTMLElement {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(props)) {
    if (value === null || value === undefined || value === false) continue;
    if (typeof value === 'function') element.addEventListener(name.replace(/^on/, ''), value);
    else if (name === 'text') element.textContent = String(value);
    else if (name in element && typeof value !== 'string')
      (element as unknown as Record<string, unknown>)[name] = value;
    else element.setAttribute(name, value === true ? '' : String(value));
  }
  append(element, children.flat());
  return element;
}

export function append(parent: Node, children: Child[]): void {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    parent.appendChild(typeof child === 'object' ? child : document.createTextNode(String(child)));
  }
}

/** A small rounded label (`.badge`), or null for none. */
export function badge(label: { text: string; title: string } | null): HTMLElement | null {
  return label ? h('span', { class: 'badge', text: label.text, title: label.title }) : null;
}

/** Replaces everything in `parent`. */
export function replace(parent: Node, ...children: Array<Child | Child[]>): void {
  while (parent.firstChild) parent.removeChild(parent.firstChild);
  append(parent, children.flat());
}

/** A `<select>` of `[value, label]` choices with `selected` chosen. */
export function select(
  choices: ReadonlyArray<readonly [string, string]>,
  selected: string,
  props: Props = {},
): HTMLSelectElement {
  const element = h('select', props) as HTMLSelectElement;
  for (const [value, label] of choices) element.appendChild(h('option', { value, text: label }));
  element.value = selected;
  return element;
}
