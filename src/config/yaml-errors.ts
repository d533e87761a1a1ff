import type { YAMLError } from 'yaml';

/**
 * YAML syntax errors as `line L, column C: what`, at the line a person must fix. The parser reports some
 * errors where the construct it was reading began, not where it broke: a line indented under a key that
 * already has a value (`b: 2` then ` c: 3`) comes as two errors on the line above, and an unclosed quote
 * or flow collection at the line after it. Those are moved to the line at fault; the rest keep the parser's position.
 */
export function describeYamlErrors(errors: readonly YAMLError[], text: string): string[] {
  const out: string[] = [];
  const seen = new Set<number>();
  for (const e of errors) {
    const [start, end] = e.pos;
    const message = e.message.split('\n')[0]!.replace(/ at line \d+, column \d+:?$/, '');
    if (e.code === 'BLOCK_AS_IMPLICIT_KEY' || e.code === 'MULTILINE_IMPLICIT_KEY') {
      // One report for the pair, at the first line after the value that carries text.
      if (seen.has(start)) continue;
      seen.add(start);
      const wider = errors.find((o) => o.pos[0] === start && o.code === 'MULTILINE_IMPLICIT_KEY')?.pos[1] ?? end;
      const at = firstTextAfterLine(text, start, wider);
      if (at !== undefined) {
        out.push(`${where(text, at)}: indented deeper than the line above, whose key already has a value (a nested mapping must start on a line of its own)`);
        continue;
      }
    }
    if (e.code === 'MISSING_CHAR' && /quote/.test(message)) {
      const quote = /Missing closing (["'])/.exec(message)?.[1];
      const open = quote ? text.lastIndexOf(quote, Math.min(start, text.length - 1)) : -1;
      if (open >= 0) {
        out.push(`${where(text, open)}: ${message} (the quote opened here is never closed)`);
        continue;
      }
    }
    const closing = /end with an? ([\]}])/.exec(message)?.[1];
    if (closing) {
      const open = text.lastIndexOf(closing === ']' ? '[' : '{', Math.min(start, text.length - 1));
      if (open >= 0) {
        out.push(`${where(text, open)}: ${message} (the ${closing === ']' ? '[' : '{'} opened here is never closed)`);
        continue;
      }
    }
    const at = e.linePos?.[0];
    out.push(`${at ? `line ${at.line}, column ${at.col}: ` : ''}${message}`);
  }
  return out;
}

/** The offset of the first non-blank character on a line after the one holding `from`, before `until`. */
function firstTextAfterLine(text: string, from: number, until: number): number | undefined {
  const lineEnd = text.indexOf('\n', from);
  if (lineEnd < 0) return undefined;
  for (let i = lineEnd + 1; i < Math.max(until, lineEnd + 2) && i < text.length; i++) {
    if (text[i] !== ' ' && text[i] !== '\t' && text[i] !== '\n' && text[i] !== '\r') return i;
  }
  return undefined;
}

function where(text: string, offset: number): string {
  const before = text.slice(0, offset);
  const line = before.split('\n').length;
  return `line ${line}, column ${offset - before.lastIndexOf('\n')}`;
}
