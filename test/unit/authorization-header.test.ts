import { describe, expect, it } from 'vitest';
import { parseAuthorization, parseBasic, type Credentials } from '../../src/auth/authorization-header.js';

/** Base64 of UTF-8 text (test input only). */
const b64 = (text: string) => Buffer.from(text, 'utf8').toString('base64');
/** Base64 of raw bytes (test input only). */
const b64bytes = (bytes: number[]) => Buffer.from(bytes).toString('base64');

const ALICE = b64('alice:pw'); // YWxpY2U6cHc=

/** [description, header value, scheme the refusal is attributed to]. */
const malformed: [string, string, 'basic' | 'bearer' | 'unknown'][] = [
  ['empty', '', 'unknown'],
  ['only spaces', '   ', 'unknown'],
  ['"Basic" alone', 'Basic', 'basic'],
  ['"Basic " with nothing after the space', 'Basic ', 'basic'],
  ['two spaces after Basic', `Basic  ${ALICE}`, 'basic'],
  ['tab instead of space', `Basic\t${ALICE}`, 'basic'],
  ['leading space', ` Basic ${ALICE}`, 'basic'],
  ['trailing space', `Basic ${ALICE} `, 'basic'],
  ['no space between scheme and credentials', `Basic${ALICE}`, 'unknown'],
  ['three parts', `Basic ${ALICE} extra`, 'basic'],
  ['two credentials separated by a comma', `Basic ${ALICE},Basic ${ALICE}`, 'basic'],
  ['non-base64 characters', 'Basic !!!!', 'basic'],
  ['base64url alphabet (- and _) instead of base64', `Basic ${b64('alice:p>?~w').replace(/\+/g, '-').replace(/\//g, '_')}`, 'basic'],
  ['base64 without its padding', `Basic ${ALICE.replace(/=+$/, '')}`, 'basic'],
  ['base64 with too much padding', `Basic ${ALICE}=`, 'basic'],
  ['base64 with junk after the padding', `Basic ${ALICE}YWxp`, 'basic'],
  ['base64 with a length not a multiple of 4', `Basic ${b64('alice:pw1')}Y`, 'basic'],
  ['base64 with non-zero padding bits (not canonical: YWxpY2U6cHd= also decodes to alice:pw)', 'Basic YWxpY2U6cHd=', 'basic'],
  ['only padding', 'Basic ====', 'basic'],
  ['no colon', `Basic ${b64('alicepw')}`, 'basic'],
  ['empty user', `Basic ${b64(':pw')}`, 'basic'],
  ['only a colon', `Basic ${b64(':')}`, 'basic'],
  ['empty credentials (base64 of nothing is nothing)', 'Basic =', 'basic'],
  ['NUL in the user', `Basic ${b64('al\u0000ice:pw')}`, 'basic'],
  ['NUL in the password', `Basic ${b64('alice:p\u0000w')}`, 'basic'],
  ['LF in the user', `Basic ${b64('alice\n:pw')}`, 'basic'],
  ['CR LF in the password', `Basic ${b64('alice:pw\r\nX-Injected: 1')}`, 'basic'],
  ['TAB in the password', `Basic ${b64('alice:p\tw')}`, 'basic'],
  ['DEL in the password', `Basic ${b64('alice:p\u007fw')}`, 'basic'],
  ['ESC in the user', `Basic ${b64('\u001balice:pw')}`, 'basic'],
  ['invalid UTF-8 byte 0xFF', `Basic ${b64bytes([0x61, 0xff, 0x3a, 0x62])}`, 'basic'],
  ['overlong UTF-8 encoding of "/" (C0 AF)', `Basic ${b64bytes([0x61, 0xc0, 0xaf, 0x3a, 0x62])}`, 'basic'],
  ['UTF-8 encoded surrogate (ED A0 80)', `Basic ${b64bytes([0x61, 0xed, 0xa0, 0x80, 0x3a, 0x62])}`, 'basic'],
  ['truncated UTF-8 sequence (C3 at the end)', `Basic ${b64bytes([0x61, 0x3a, 0x62, 0xc3])}`, 'basic'],
  ['Latin-1 user name (ü as byte FC)', `Basic ${b64bytes([0x6a, 0xfc, 0x72, 0x67, 0x65, 0x6e, 0x3a, 0x70])}`, 'basic'],
  ['unknown scheme Digest with parameters', 'Digest username="alice", realm="auth-gateway"', 'unknown'],
  ['unknown scheme Digest with a token68', `Digest ${ALICE}`, 'unknown'],
  ['unknown scheme Negotiate', 'Negotiate YIIBhwYGKwYBBQUCoIIBezCCAXe=', 'unknown'],
  ['scheme with a hyphen', `Basic-Auth ${ALICE}`, 'unknown'],
  ['"Bearer" alone', 'Bearer', 'bearer'],
  ['"Bearer " with nothing after the space', 'Bearer ', 'bearer'],
  ['two spaces after Bearer', 'Bearer  abc.def.ghi', 'bearer'],
  ['tab after Bearer', 'Bearer\tabc.def.ghi', 'bearer'],
  ['Bearer with three parts', 'Bearer abc def', 'bearer'],
  ['Bearer token with "=" inside', 'Bearer abc=def', 'bearer'],
  ['Bearer token in quotes', 'Bearer "abc.def.ghi"', 'bearer'],
  ['Bearer token with a comma', 'Bearer abc,def', 'bearer'],
  ['Bearer token with non-ASCII', 'Bearer abc\u00e9', 'bearer'],
];

/** [description, header value, credentials]. */
const accepted: [string, string, Credentials][] = [
  ['Basic alice:pw', `Basic ${ALICE}`, { scheme: 'basic', user: 'alice', password: 'pw' }],
  ['lower-case "basic"', `basic ${ALICE}`, { scheme: 'basic', user: 'alice', password: 'pw' }],
  ['upper-case "BASIC"', `BASIC ${ALICE}`, { scheme: 'basic', user: 'alice', password: 'pw' }],
  ['colon inside the password: split at the first colon', `Basic ${b64('alice:pw:with:colons')}`, { scheme: 'basic', user: 'alice', password: 'pw:with:colons' }],
  ['password that is only a colon', `Basic ${b64('alice::')}`, { scheme: 'basic', user: 'alice', password: ':' }],
  ['empty password (the password check, not the parser, refuses it)', `Basic ${b64('alice:')}`, { scheme: 'basic', user: 'alice', password: '' }],
  ['UTF-8 user and password (jürgen)', `Basic ${b64('jürgen:pässwörd')}`, { scheme: 'basic', user: 'jürgen', password: 'pässwörd' }],
  ['UTF-8 outside the BMP', `Basic ${b64('名前😀:密码')}`, { scheme: 'basic', user: '名前😀', password: '密码' }],
  ['spaces inside user and password', `Basic ${b64('a b:c d')}`, { scheme: 'basic', user: 'a b', password: 'c d' }],
  ['base64 with "+" and "/"', `Basic ${b64('alice:>>>???')}`, { scheme: 'basic', user: 'alice', password: '>>>???' }],
  ['base64 with "==" padding', `Basic ${b64('alice:p')}`, { scheme: 'basic', user: 'alice', password: 'p' }],
  ['Bearer JWT-shaped token', 'Bearer abc.def.ghi', { scheme: 'bearer', token: 'abc.def.ghi' }],
  ['mixed-case "bEaReR"', 'bEaReR abc.def.ghi', { scheme: 'bearer', token: 'abc.def.ghi' }],
  ['lower-case "bearer"', 'bearer abc', { scheme: 'bearer', token: 'abc' }],
  ['Bearer with every token68 character and trailing "="', 'Bearer aZ09-._~+/==', { scheme: 'bearer', token: 'aZ09-._~+/==' }],
];

describe('parseAuthorization (RFC 7235 / 7617 / 6750, strict)', () => {
  it('the encoded inputs are what they claim to be', () => {
    expect(ALICE).toBe('YWxpY2U6cHc=');
    expect(b64('alice:>>>???')).toMatch(/[+/]/);
    expect(b64('alice:p')).toMatch(/==$/);
  });

  it.each(malformed)('refuses %s: %j (scheme %s)', (_description, header, scheme) => {
    const result = parseAuthorization(header);
    expect(result.ok).toBe(false);
    if (result.ok) return;
    expect(result.scheme).toBe(scheme);
    expect(result.reason.length).toBeGreaterThan(0);
  });

  it.each(accepted)('accepts %s: %j', (_description, header, credentials) => {
    expect(parseAuthorization(header)).toEqual({ ok: true, credentials });
  });

  it('a leading UTF-8 BOM is not silently dropped from the user name', () => {
    // EF BB BF + "alice:pw": a different byte string from "alice:pw"; it must not parse as user alice.
    const result = parseAuthorization(`Basic ${b64('\ufeffalice:pw')}`);
    if (result.ok) {
      expect(result.credentials).toEqual({ scheme: 'basic', user: '\ufeffalice', password: 'pw' });
    } else {
      expect(result.scheme).toBe('basic');
    }
  });
});

describe('parseBasic against its plain reading', () => {
  /** What parseBasic must answer: decode, re-encode to compare, a fatal UTF-8 decoder, the control-character check. */
  function reference(value: string): { user: string; password: string } | undefined {
    if (!/^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/.test(value)) return undefined;
    const bytes = Buffer.from(value, 'base64');
    if (bytes.toString('base64') !== value) return undefined;
    let text: string;
    try {
      text = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(bytes);
    } catch {
      return undefined;
    }
    const colon = text.indexOf(':');
    if (colon <= 0) return undefined;
    // eslint-disable-next-line no-control-regex
    if (/[\u0000-\u001f\u007f]/.test(text)) return undefined;
    return { user: text.slice(0, colon), password: text.slice(colon + 1) };
  }

  it('agrees on every padding variant, random bytes and random printable text', () => {
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
    const values: string[] = [];
    // Every last character before one and two padding signs, every byte count's shape.
    for (const c of alphabet) values.push(`YWxpY2U6c${c}==`, `YWxpY2U6cH${c}=`, `YWxpY2U6cHc${c}`);
    let seed = 7;
    const next = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31);
    for (let i = 0; i < 3000; i++) {
      const length = 1 + (next() % 24);
      const printable = i % 2 === 0;
      const bytes = Buffer.from(Array.from({ length }, () => (printable ? 0x20 + (next() % 95) : next() % 256)));
      if (i % 3 === 0) bytes[next() % length] = 0x3a;
      values.push(bytes.toString('base64'));
    }
    for (const value of values) {
      const parsed = parseBasic(value);
      const expected = reference(value);
      expect(parsed.ok ? { user: (parsed.credentials as { user: string }).user, password: (parsed.credentials as { password: string }).password } : undefined, value).toEqual(expected);
    }
  });
});
