import type { ClientUserFrom } from '../config/types.js';
import { DomainError } from '../core/domain-error.js';
import type { Principal } from '../core/principal.js';
import type { Authenticator } from './authenticator.js';
import { refused, type ClientCertificate, type ClientCertificates } from './peer-certificates.js';

// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f]/;
const MAX_USER_LENGTH = 256;

/**
 * A verified client certificate of the request's connection (server.tls.clientCa) as the identity:
 * `via: mtls`, the user from server.tls.userFrom, the groups from the subject's OU values. Asked after
 * Basic and Bearer: a request that also carries one of those is decided by it (the certificate is still
 * recorded, see ClientCertificates.screen). The certificate is read once per connection. A browser sends
 * its client certificate by itself: the principal is ambient. An open tunnel ends when the certificate
 * expires, or when a CRL read since revokes it.
 */
export function mtlsAuthenticator(certificates: ClientCertificates): Authenticator<ClientCertificate> {
  const userOf = userReader(certificates.userFrom);
  return {
    via: 'mtls',
    scheme: undefined,
    challenge: undefined,
    securityScheme: { name: 'clientCertificate', scheme: { type: 'mutualTLS', description: 'A client certificate the gateway\'s TLS listener verifies (server.tls.clientCa).' } },
    // A forward-auth question comes over the asking proxy's connection: its certificate is the proxy's,
    // never the user's; authenticate does not ask this source then.
    fromConnection: true,
    parse(req) {
      return certificates.of(req);
    },
    verify(cert) {
      if (!cert.verified) throw refused(cert);
      const user = userOf(cert);
      if (user === undefined || user === '' || user.length > MAX_USER_LENGTH || CONTROL.test(user)) {
        throw new DomainError('credentials_not_accepted', `the client certificate names no usable user (server.tls.userFrom: ${certificates.userFrom})`);
      }
      return {
        user,
        via: 'mtls',
        groups: cert.ou,
        ownGroups: true,
        sid: undefined,
        expiresAt: Math.floor(cert.validToMs / 1000),
        ambient: true,
        proof: cert.revocationId,
        credential: undefined,
      } satisfies Principal;
    },
    recheck(owner) {
      return certificates.isRevoked(owner.proof) ? 'certificate revoked' : undefined;
    },
  };
}

function userReader(from: ClientUserFrom): (cert: ClientCertificate) => string | undefined {
  switch (from) {
    case 'cn': return (cert) => (cert.cn.length === 1 ? cert.cn[0] : undefined);
    case 'san-email': return (cert) => cert.email[0];
    case 'san-uri': return (cert) => cert.uri[0];
    case 'san-dns': return (cert) => cert.dns[0];
  }
}
