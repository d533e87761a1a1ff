import { readFileSync } from 'node:fs';
import { join } from 'node:path';

const DOCS = join(import.meta.dirname, '../../../docs');

/**
 * The one fenced block of language `lang` under the heading `heading` (up to the next heading of any
 * level) in docs/`file`: tests run the configurations the docs print, so the two cannot drift apart.
 */
export function docBlock(file: string, heading: string, lang: string): string {
  const text = readFileSync(join(DOCS, file), 'utf8');
  const start = text.indexOf(`\n${heading}\n`);
  if (start < 0) throw new Error(`docs/${file} has no heading ${heading}`);
  const next = text.slice(start + heading.length + 2).search(/\n#{1,6} /);
  const section = next < 0 ? text.slice(start) : text.slice(start, start + heading.length + 2 + next);
  const blocks = [...section.matchAll(new RegExp('```' + lang + '\\n([\\s\\S]*?)\\n```', 'g'))];
  if (blocks.length !== 1) throw new Error(`docs/${file}, ${heading}: expected one \`\`\`${lang} block, found ${blocks.length}`);
  return blocks[0]![1]!;
}

/** Each placeholder replaced everywhere; one that does not occur fails (the docs changed: change the test too). */
export function fill(text: string, replacements: Array<[string, string]>): string {
  let out = text;
  for (const [from, to] of replacements) {
    if (!out.includes(from)) throw new Error(`the documented configuration no longer contains ${JSON.stringify(from)}`);
    out = out.split(from).join(to);
  }
  return out;
}
