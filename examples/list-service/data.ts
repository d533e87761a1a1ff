// Deterministic, seeded example data for the list service.
// The same seed and record count always produce the same records, so tests
// and demos can rely on exact values.

type ConversationStatus = 'open' | 'closed' | 'pending';

export interface Conversation {
  id: string;
  campaignId: string;
  subject: string;
  status: ConversationStatus;
  createdAt: string;
}

export interface Contact {
  id: string;
  name: string;
  phoneNumber: string;
  email: string;
  createdAt: string;
}

export interface Dataset {
  conversations: readonly Conversation[];
  contacts: readonly Contact[];
}

export const DEFAULT_SEED = 42;
export const DEFAULT_RECORDS = 1000;

/** A generator of uniformly distributed numbers in [0, 1). */
type Random = () => number;

/** mulberry32: a tiny, fast 32-bit PRNG; good enough for example data. */
function mulberry32(seed: number): Random {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function randomInt(random: Random, minInclusive: number, maxInclusive: number): number {
  return minInclusive + Math.floor(random() * (maxInclusive - minInclusive + 1));
}

function pick<T>(random: Random, items: readonly T[]): T {
  const item = items[Math.floor(random() * items.length)];
  if (item === undefined) throw new Error('pick from an empty list');
  return item;
}

const CAMPAIGN_COUNT = 25;
const STATUSES: readonly ConversationStatus[] = ['open', 'closed', 'pending'];
const SUBJECT_TOPICS: readonly string[] = [
  'Delivery delayed',
  'Invoice question',
  'Change of address',
  'Appointment reminder',
  'Order confirmation',
  'Refund request',
  'Password reset',
  'Contract renewal',
  'Feedback on service',
  'Payment failed',
];
const FIRST_NAMES: readonly string[] = [
  'Anna', 'Ben', 'Clara', 'David', 'Emma', 'Felix', 'Greta', 'Hannah', 'Ida', 'Jonas',
  'Karl', 'Lena', 'Mia', 'Noah', 'Olivia', 'Paul', 'Quentin', 'Rosa', 'Sophie', 'Tim',
];
const LAST_NAMES: readonly string[] = [
  'Becker', 'Fischer', 'Hoffmann', 'Koch', 'Meyer', 'Neumann', 'Richter', 'Schmidt',
  'Schneider', 'Schulz', 'Wagner', 'Weber', 'Wolf', 'Zimmermann', 'Braun', 'Klein',
];
const MOBILE_PREFIXES: readonly string[] = [
  '151', '152', '157', '159', '160', '162', '163', '170', '171', '172', '173', '175', '176', '177', '178', '179',
];

// createdAt values fall between these two instants (whole seconds).
const EPOCH_START_SECONDS = Date.UTC(2023, 0, 1) / 1000;
const EPOCH_SPAN_SECONDS = (Date.UTC(2025, 0, 1) - Date.UTC(2023, 0, 1)) / 1000;

function randomCreatedAt(random: Random): string {
  const seconds = EPOCH_START_SECONDS + Math.floor(random() * EPOCH_SPAN_SECONDS);
  return new Date(seconds * 1000).toISOString();
}

/** Zero-padded ids keep lexical order equal to creation order. */
function makeId(prefix: string, index: number, total: number): string {
  const width = Math.max(6, String(total).length);
  return `${prefix}-${String(index + 1).padStart(width, '0')}`;
}

function makeConversation(random: Random, index: number, total: number): Conversation {
  const campaign = randomInt(random, 1, CAMPAIGN_COUNT);
  return {
    id: makeId('conv', index, total),
    campaignId: `cmp-${String(campaign).padStart(3, '0')}`,
    subject: `${pick(random, SUBJECT_TOPICS)} #${randomInt(random, 1000, 9999)}`,
    status: pick(random, STATUSES),
    createdAt: randomCreatedAt(random),
  };
}

function makePhoneNumber(random: Random): string {
  const subscriber = String(randomInt(random, 0, 99_999_999)).padStart(8, '0');
  return `+49${pick(random, MOBILE_PREFIXES)}${subscriber}`;
}

function makeContact(random: Random, index: number, total: number): Contact {
  const first = pick(random, FIRST_NAMES);
  const last = pick(random, LAST_NAMES);
  const id = makeId('ct', index, total);
  return {
    id,
    name: `${first} ${last}`,
    phoneNumber: makePhoneNumber(random),
    email: `${first}.${last}.${index + 1}@example.com`.toLowerCase(),
    createdAt: randomCreatedAt(random),
  };
}

function generateConversations(count: number, seed: number): Conversation[] {
  const random = mulberry32(seed);
  return Array.from({ length: count }, (_, index) => makeConversation(random, index, count));
}

function generateContacts(count: number, seed: number): Contact[] {
  // A separate stream, so the contacts do not depend on the conversations.
  const random = mulberry32((seed ^ 0x9e3779b9) >>> 0);
  return Array.from({ length: count }, (_, index) => makeContact(random, index, count));
}

function checkOption(name: string, value: number, min: number): void {
  if (!Number.isSafeInteger(value) || value < min) {
    throw new RangeError(`${name} must be an integer >= ${min}, got ${String(value)}`);
  }
}

/**
 * Builds both collections once; `records` applies to each of them.
 * The seed is any safe integer, used modulo 2^32.
 */
export function generateDataset(records: number = DEFAULT_RECORDS, seed: number = DEFAULT_SEED): Dataset {
  checkOption('records', records, 0);
  if (!Number.isSafeInteger(seed)) {
    throw new RangeError(`seed must be an integer, got ${String(seed)}`);
  }
  return {
    conversations: Object.freeze(generateConversations(records, seed)),
    contacts: Object.freeze(generateContacts(records, seed)),
  };
}
