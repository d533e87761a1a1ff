import { SETTINGS, type Setting } from './defaults.js';

/** Where the generated reference is committed, relative to the repository root. */
export const REFERENCE_FILE = 'docs/configuration.md';

const INTRO = `# Configuration reference

<!-- Generated from src/config/defaults.ts by \`npm run docs:config\`; do not edit by hand (a test compares the two). -->

One YAML file, default \`config/gateway.yaml\` (\`--config FILE\` names another). \`\${VAR}\` and \`\${VAR:-default}\`
in values are replaced from the environment after parsing, so a value cannot inject YAML. Two variables
override keys directly: \`REDIS_URL\` selects the redis store with that URL (the single-node form; together
with \`store.cluster\` or \`store.sentinel\` it is refused, and a misspelt \`store.kind\` is still reported), and
\`PORT\` sets \`server.port\`.

\`auth-gateway config check\` lists every problem at once, each naming its key and where the file has it,
and a bad value with the value found (shortened; \`(hidden)\` under a key such as \`secret\`, \`password\` or
\`apiToken\`): \`tokens.accessTtlSeconds (line 6, column 3) must be a positive integer; found -5\`,
\`servr (line 2, column 1) is not a known setting; did you mean server?\`, \`server.port (set by PORT) …\`.
\`serve\` refuses to start on any of them and exits 2. Relative paths are relative to the configuration file.
\`<name>\` stands for an upstream's name, \`[]\` for an entry of a list.
`;

/** The reference as markdown: one table per top-level section, in the table's order. */
export function renderReference(settings: Record<string, Setting> = SETTINGS): string {
  const sections = new Map<string, string[]>();
  for (const [key, s] of Object.entries(settings)) {
    const section = /^[^.[]+/.exec(key)![0];
    const rows = sections.get(section) ?? [];
    rows.push(`| \`${key}\` | ${cell(typeOf(s))} | ${cell(defaultOf(s))} | ${cell(s.meaning)} |`);
    sections.set(section, rows);
  }
  const parts = [INTRO];
  for (const [section, rows] of sections) {
    parts.push(`## ${section}\n\n| key | type | default | meaning |\n|---|---|---|---|\n${rows.join('\n')}\n`);
  }
  return parts.join('\n');
}

/** The type with an integer's bounds (`integer, 0 to 65535`, `integer ≥ 100`). */
function typeOf(s: Setting): string {
  if (s.min !== undefined && s.max !== undefined) return `${s.type}, ${s.min} to ${s.max}`;
  if (s.min !== undefined && s.min !== 1) return `${s.type} ≥ ${s.min}`;
  return s.type;
}

function defaultOf(s: Setting): string {
  if (s.defaultText !== undefined) return s.defaultText;
  if (s.default === undefined) return 'none';
  return `\`${Array.isArray(s.default) ? `[${s.default.join(', ')}]` : String(s.default)}\``;
}

/** A table cell: pipes escaped, on one line. */
function cell(text: string): string {
  return text.replace(/\|/g, '\\|').replace(/\n/g, ' ');
}
