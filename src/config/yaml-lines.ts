import { isNode, LineCounter, parseDocument, type Document } from 'yaml';

/** The line of the file a key (`routes[2].allow.methods[1]`) was written on, or undefined. */
export type KeyLocator = (key: string) => number | undefined;

/**
 * Where each key of a parsed file sits: the line of the value a key path names, or of the nearest
 * enclosing value there is (`methods: GET`, a scalar where a list was expected, has no `methods[0]`).
 */
export function keyLocator(doc: Document, lines: LineCounter): KeyLocator {
  return (key) => {
    const path = keyPath(key);
    for (let n = path.length; n > 0; n--) {
      const node = doc.getIn(path.slice(0, n), true);
      if (isNode(node) && node.range) return lines.linePos(node.range[0]).line;
    }
    return undefined;
  };
}

/** The locator of a file's text (none when the YAML does not parse: its errors carry their own lines). */
export function locatorOf(text: string): KeyLocator {
  const lines = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lines });
  return doc.errors.length > 0 ? () => undefined : keyLocator(doc, lines);
}

/** `routes[2].allow.methods[1]` → ['routes', 2, 'allow', 'methods', 1]. */
function keyPath(key: string): Array<string | number> {
  const path: Array<string | number> = [];
  for (const m of key.matchAll(/([^.[\]]+)|\[(\d+)\]/g)) path.push(m[2] !== undefined ? Number(m[2]) : m[1]!);
  return path;
}
