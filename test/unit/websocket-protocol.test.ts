import { describe, expect, it } from 'vitest';
import { BEARER_PROTOCOL_PREFIX, takeBearerProtocol } from '../../src/proxy/websocket-protocol.js';

const entry = (token: string) => `${BEARER_PROTOCOL_PREFIX}${Buffer.from(token).toString('base64url')}`;

describe('takeBearerProtocol', () => {
  it('leaves headers without a token entry alone', () => {
    expect(takeBearerProtocol(undefined)).toEqual({ kind: 'none' });
    expect(takeBearerProtocol('chat, superchat')).toEqual({ kind: 'none' });
    // Only the exact prefix counts: the shapes other products use are someone else's subprotocols.
    expect(takeBearerProtocol('bearer.abc, chat')).toEqual({ kind: 'none' });
  });

  it('takes the token out and keeps the other entries in order, across repeated headers', () => {
    expect(takeBearerProtocol(`chat, ${entry('eyJ.a-b_c.d')} , v2`)).toEqual({ kind: 'token', token: 'eyJ.a-b_c.d', rest: ['chat', 'v2'] });
    expect(takeBearerProtocol(['chat', entry('t0k3n')])).toEqual({ kind: 'token', token: 't0k3n', rest: ['chat'] });
  });

  it('refuses a token entry alone, two token entries, and non-canonical base64url', () => {
    expect(takeBearerProtocol(entry('t')).kind).toBe('invalid');
    expect(takeBearerProtocol(`${entry('a')}, ${entry('b')}, chat`).kind).toBe('invalid');
    expect(takeBearerProtocol(`${BEARER_PROTOCOL_PREFIX}dA==, chat`).kind).toBe('invalid');
    expect(takeBearerProtocol(`${BEARER_PROTOCOL_PREFIX}dB, chat`).kind).toBe('invalid');
    expect(takeBearerProtocol(`${BEARER_PROTOCOL_PREFIX}, chat`).kind).toBe('invalid');
  });
});
