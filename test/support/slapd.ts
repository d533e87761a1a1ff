import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { candidatePort } from './process.js';

/**
 * A real OpenLDAP slapd of the test's own (Debian's /usr/sbin/slapd, mdb backend), on two loopback ports:
 * `ldap://` (StartTLS offered) and `ldaps://`, with a test CA and a server certificate for 127.0.0.1 made
 * by openssl. The directory holds dc=example,dc=com with people (ou=people, uid=…, userPassword), groups
 * (ou=groups, groupOfNames with member) and a service account (cn=gateway) that may read everything; an
 * anonymous client may only bind and read the root DSE. It can be stopped and started again on the same
 * ports (the data stays).
 */
export interface TestSlapd {
  /** `ldap://127.0.0.1:PORT` */
  url: string;
  /** `ldaps://127.0.0.1:PORT2` */
  ldapsUrl: string;
  /** PEM file of the CA that signed the server's certificate. */
  caFile: string;
  /** PEM file of another CA, which did not. */
  otherCaFile: string;
  baseDn: string;
  serviceDn: string;
  servicePassword: string;
  /** Adds entries (LDIF) through ldapadd as the directory's manager. */
  add(ldif: string): void;
  /** Deletes an entry through ldapdelete as the directory's manager. */
  remove(dn: string): void;
  stop(): Promise<void>;
  start(): Promise<void>;
  /** Stops it and removes its folder. */
  destroy(): Promise<void>;
}

export interface DirectoryPerson {
  uid: string;
  password: string;
  /** cn of the groups (groupOfNames under ou=groups) it is a member of. */
  groups?: string[];
}

const BASE = 'dc=example,dc=com';
const MANAGER = `cn=admin,${BASE}`;
const MANAGER_PASSWORD = 'manager-secret';
const SERVICE_DN = `cn=gateway,${BASE}`;
const SERVICE_PASSWORD = 'gateway-secret';

export function personDn(uid: string): string {
  return `uid=${uid},ou=people,${BASE}`;
}

export async function startSlapd(people: DirectoryPerson[]): Promise<TestSlapd> {
  const dir = mkdtempSync(join(tmpdir(), 'gw-slapd-'));
  const dataDir = join(dir, 'data');
  mkdirSync(dataDir);
  const tls = makeCertificates(dir);
  const conf = join(dir, 'slapd.conf');
  writeFileSync(conf, slapdConf(dir, dataDir, tls));
  execFileSync('/usr/sbin/slapadd', ['-q', '-f', conf, '-l', writeLdif(dir, 'initial.ldif', initialLdif(people))], { stdio: 'pipe' });

  let child: ChildProcess | undefined;
  let port = 0;
  let tlsPort = 0;
  const start = async () => {
    const restart = port !== 0;
    let lastOutput = '';
    for (let attempt = 0; attempt < 8; attempt++) {
      if (!restart) {
        port = await candidatePort();
        tlsPort = await candidatePort();
      }
      const spawned = spawn('/usr/sbin/slapd', ['-f', conf, '-h', `ldap://127.0.0.1:${port}/ ldaps://127.0.0.1:${tlsPort}/`, '-d', '0'], { stdio: ['ignore', 'pipe', 'pipe'] });
      let output = '';
      spawned.stdout!.on('data', (d: Buffer) => (output += d.toString()));
      spawned.stderr!.on('data', (d: Buffer) => (output += d.toString()));
      child = spawned;
      if (await waitForListening([port, tlsPort], spawned)) return;
      lastOutput = output;
      await kill(spawned, 'SIGKILL');
      child = undefined;
      if (restart) await new Promise((r) => setTimeout(r, 200));
    }
    throw new Error(`slapd did not start on 127.0.0.1:${port}/${tlsPort} (is it installed? apt-get install slapd ldap-utils):\n${lastOutput}`);
  };
  const stop = async () => {
    const c = child;
    child = undefined;
    if (c) await kill(c, 'SIGTERM');
  };
  await start();
  const url = () => `ldap://127.0.0.1:${port}`;
  return {
    get url() {
      return url();
    },
    get ldapsUrl() {
      return `ldaps://127.0.0.1:${tlsPort}`;
    },
    caFile: tls.caFile,
    otherCaFile: tls.otherCaFile,
    baseDn: BASE,
    serviceDn: SERVICE_DN,
    servicePassword: SERVICE_PASSWORD,
    add(ldif) {
      execFileSync('ldapadd', ['-x', '-H', url(), '-D', MANAGER, '-w', MANAGER_PASSWORD, '-f', writeLdif(dir, `add-${Date.now()}.ldif`, ldif)], { stdio: 'pipe' });
    },
    remove(dn) {
      execFileSync('ldapdelete', ['-x', '-H', url(), '-D', MANAGER, '-w', MANAGER_PASSWORD, dn], { stdio: 'pipe' });
    },
    stop,
    start,
    async destroy() {
      await stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** LDIF of a person under ou=people (the password stored as given; slapd compares it on a simple bind). */
export function personLdif(uid: string, password: string): string {
  return [
    `dn: ${personDn(uid)}`, 'objectClass: inetOrgPerson', `uid: ${uid}`, `cn: ${uid}`, `sn: ${uid}`, `userPassword: ${password}`, '',
  ].join('\n');
}

function initialLdif(people: DirectoryPerson[]): string {
  const entries = [
    [`dn: ${BASE}`, 'objectClass: dcObject', 'objectClass: organization', 'dc: example', 'o: Example'],
    [`dn: ou=people,${BASE}`, 'objectClass: organizationalUnit', 'ou: people'],
    [`dn: ou=groups,${BASE}`, 'objectClass: organizationalUnit', 'ou: groups'],
    [`dn: ${SERVICE_DN}`, 'objectClass: organizationalRole', 'objectClass: simpleSecurityObject', 'cn: gateway', `userPassword: ${SERVICE_PASSWORD}`],
  ].map((lines) => lines.join('\n') + '\n');
  for (const p of people) entries.push(personLdif(p.uid, p.password));
  const groups = new Map<string, string[]>();
  for (const p of people) for (const g of p.groups ?? []) groups.set(g, [...(groups.get(g) ?? []), personDn(p.uid)]);
  for (const [cn, members] of groups) {
    entries.push([`dn: cn=${cn},ou=groups,${BASE}`, 'objectClass: groupOfNames', `cn: ${cn}`, ...members.map((m) => `member: ${m}`)].join('\n') + '\n');
  }
  return entries.join('\n');
}

function slapdConf(dir: string, dataDir: string, tls: Certificates): string {
  return `
include /etc/ldap/schema/core.schema
include /etc/ldap/schema/cosine.schema
include /etc/ldap/schema/inetorgperson.schema
pidfile ${join(dir, 'slapd.pid')}
argsfile ${join(dir, 'slapd.args')}
modulepath /usr/lib/ldap
moduleload back_mdb
TLSCACertificateFile ${tls.caFile}
TLSCertificateFile ${tls.certFile}
TLSCertificateKeyFile ${tls.keyFile}

database mdb
maxsize 16777216
suffix "${BASE}"
rootdn "${MANAGER}"
rootpw ${MANAGER_PASSWORD}
directory ${dataDir}
access to dn.base="" by * read
access to attrs=userPassword by self read by anonymous auth by * none
access to * by dn.exact="${SERVICE_DN}" read by users read by * none
`;
}

interface Certificates {
  caFile: string;
  otherCaFile: string;
  certFile: string;
  keyFile: string;
}

/** A CA, a server certificate it signed for 127.0.0.1 and localhost, and another CA that signed nothing. */
function makeCertificates(dir: string): Certificates {
  const f = (name: string) => join(dir, name);
  const openssl = (...args: string[]) => execFileSync('openssl', args, { stdio: 'pipe' });
  for (const ca of ['ca', 'other-ca']) {
    openssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', f(`${ca}.key`), '-out', f(`${ca}.pem`), '-days', '2', '-subj', `/CN=auth-gateway test ${ca}`,
      '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign');
  }
  openssl('req', '-newkey', 'rsa:2048', '-nodes', '-keyout', f('server.key'), '-out', f('server.csr'), '-subj', '/CN=127.0.0.1');
  writeFileSync(f('server.ext'), 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n');
  openssl('x509', '-req', '-in', f('server.csr'), '-CA', f('ca.pem'), '-CAkey', f('ca.key'), '-CAcreateserial', '-out', f('server.pem'), '-days', '2', '-extfile', f('server.ext'));
  return { caFile: f('ca.pem'), otherCaFile: f('other-ca.pem'), certFile: f('server.pem'), keyFile: f('server.key') };
}

function writeLdif(dir: string, name: string, text: string): string {
  const file = join(dir, name);
  writeFileSync(file, text);
  return file;
}

/** Both ports accept connections (slapd opens its listeners once its database is ready), or the process ended. */
async function waitForListening(ports: number[], child: ChildProcess, timeoutMs = 10_000): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.exitCode !== null || child.signalCode !== null) return false;
    const open = await Promise.all(ports.map(accepts));
    if (open.every(Boolean)) return child.exitCode === null;
    await new Promise((r) => setTimeout(r, 50));
  }
  return false;
}

function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = new Socket();
    socket.setTimeout(1000);
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('timeout', () => {
      socket.destroy();
      resolve(false);
    });
    socket.once('error', () => resolve(false));
    socket.connect(port, '127.0.0.1');
  });
}

function kill(c: ChildProcess, signal: NodeJS.Signals): Promise<void> {
  if (c.exitCode !== null || c.signalCode !== null) return Promise.resolve();
  return new Promise<void>((resolve) => {
    c.once('exit', () => resolve());
    c.kill(signal);
  });
}
