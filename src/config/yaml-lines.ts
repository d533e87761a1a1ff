import { isMap, isNode, isScalar, isSeq, LineCounter, parseDocument, type Document, type Node } from 'yaml';

/**
 * Where keys were written in a file. `line`: the line of the value a key path names, or of the nearest
 * enclosing value there is (`methods: GET`, a scalar where a list was expected, has no `methods[0]`), for
 * warnings. `where`: where the key itself was written, `line 12, column 7` (for a list item, the item),
 * for problems; undefined when the file has no such key (a required one left out) or it came from elsewhere.
 */
export interface KeyLocator {
  line(key: string): number | undefined;
  where(key: string): string | undefined;
}

/** A locator that knows no file (a configuration built in code). */
export const NOWHERE: KeyLocator = { line: () => undefined, where: () => undefined };

export function keyLocator(doc: Document, lines: LineCounter): KeyLocator {
  return {
    line: (key) => {
      const path = keyPath(key);
      for (let n = path.length; n > 0; n--) {
        const node = doc.getIn(path.slice(0, n), true);
        if (isNode(node) && node.range) return lines.linePos(node.range[0]).line;
      }
      return undefined;
    },
    where: (key) => {
      const offset = keyOffset(doc.contents, keyPath(key));
      if (offset === undefined) return undefined;
      const { line, col } = lines.linePos(offset);
      return `line ${line}, column ${col}`;
    },
  };
}

/** The locator of a file's text (none when the YAML does not parse: its errors carry their own lines). */
export function locatorOf(text: string): KeyLocator {
  const lines = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lines });
  return doc.errors.length > 0 ? NOWHERE : keyLocator(doc, lines);
}

/**
 * The offset of the key a path ends at (of the item, for an index), following the path exactly: a
 * segment the file does not have (or a value of another kind than the path expects) finds nothing.
 */
function keyOffset(root: unknown, path: Array<string | number>): number | undefined {
  let node: unknown = root;
  let offset: number | undefined;
  for (const segment of path) {
    if (typeof segment === 'number') {
      if (!isSeq(node)) return undefined;
      node = node.items[segment];
      offset = isNode(node) ? node.range?.[0] : undefined;
    } else {
      if (!isMap(node)) return undefined;
      const pair = node.items.find((p) => isScalar(p.key) && String(p.key.value) === segment);
      if (!pair) return undefined;
      offset = (pair.key as Node).range?.[0];
      node = pair.value;
    }
    if (offset === undefined) return undefined;
  }
  return offset;
}

/** `routes[2].allow.methods[1]` → ['routes', 2, 'allow', 'methods', 1]. */
export function keyPath(key: string): Array<string | number> {
  const path: Array<string | number> = [];
  for (const m of key.matchAll(/([^.[\]]+)|\[(\d+)\]/g)) path.push(m[2] !== undefined ? Number(m[2]) : m[1]!);
  return path;
}
