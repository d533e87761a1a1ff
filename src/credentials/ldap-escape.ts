/**
 * The user name is client input: it goes into a DN (direct bind) and into search filters only escaped,
 * so no name can change which entry is bound or what a filter matches.
 */

/**
 * An attribute value inside a DN (RFC 4514 section 2.4): `\` and `"+,;<>=` escaped with a backslash
 * everywhere, a leading `#` or space and a trailing space too, and NUL and other control characters as
 * `\XX` hex pairs of their UTF-8 bytes.
 */
export function escapeDnValue(value: string): string {
  let out = '';
  for (let i = 0; i < value.length; i++) {
    const ch = value[i]!;
    const code = ch.charCodeAt(0);
    if (code < 0x20 || code === 0x7f) out += `\\${code.toString(16).padStart(2, '0')}`;
    else if ('\\"+,;<>='.includes(ch)) out += `\\${ch}`;
    else if ((ch === '#' || ch === ' ') && i === 0) out += `\\${ch}`;
    else if (ch === ' ' && i === value.length - 1) out += '\\ ';
    else out += ch;
  }
  return out;
}

/** An assertion value inside a search filter (RFC 4515 section 3): `*`, `(`, `)`, `\` and NUL as `\XX`. */
export function escapeFilterValue(value: string): string {
  return value.replace(/[*()\\\0]/g, (ch) => `\\${ch.charCodeAt(0).toString(16).padStart(2, '0')}`);
}

/** `template` with each `{name}` replaced by its value (already escaped for where it goes). */
export function fill(template: string, values: Record<string, string>): string {
  return template.replace(/\{(\w+)\}/g, (whole, name: string) => values[name] ?? whole);
}
