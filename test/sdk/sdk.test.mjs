// SDK compatibility test: builds cmd/mailroom, starts it on a free loopback port with a temporary
// data directory and a fixed bootstrap key, and drives it with the official useSend SDK
// (usesend-js, pinned in package.json). Run: cd test/sdk && npm ci --no-audit --no-fund && node --test
//
// usesend-js 1.6.3 quirk: on an error response it returns the whole body as `error`, so with the
// wire shape {"error":{"code","message"}} the SDK result is {data: null, error: {error: {code,
// message}}} (its ErrorResponse type says {code, message}). apiError() below asserts exactly that.

import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { createServer } from 'node:http';
import { existsSync } from 'node:fs';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

import { UseSend } from 'usesend-js';

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const apiKey = 'us_sdktest001_0123456789abcdef0123456789abcdef';
const otherKey = 'us_sdktest002_fedcba9876543210fedcba9876543210';
const domainName = 'sdk-test.example.com';
const from = `Mailroom SDK Test <hello@${domainName}>`;
const recipient = 'someone@example.org';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// expire rejects after ms with message; its timer does not keep the process alive.
const expire = (ms, message) =>
  new Promise((_, reject) => setTimeout(() => reject(new Error(message)), ms).unref());

// waitFor polls fn until it returns a truthy value or the deadline passes.
async function waitFor(what, fn, timeoutMs = 10_000, intervalMs = 25) {
  const deadline = Date.now() + timeoutMs;
  let last;
  while (Date.now() < deadline) {
    last = await fn();
    if (last) return last;
    await sleep(intervalMs);
  }
  assert.fail(`timed out after ${timeoutMs} ms waiting for ${what}`);
}

// apiError returns {code, message} from a failed SDK call (see the quirk above).
function apiError(res) {
  assert.equal(res.data, null, `expected an error, got data ${JSON.stringify(res.data)}`);
  assert.ok(res.error, 'expected an error');
  const err = res.error.error;
  assert.equal(typeof err, 'object', `SDK error is ${JSON.stringify(res.error)}`);
  assert.equal(typeof err.code, 'string');
  assert.equal(typeof err.message, 'string');
  return err;
}

// ok asserts an SDK call succeeded and returns its data.
function ok(res) {
  assert.equal(res.error, null, `unexpected error ${JSON.stringify(res.error)}`);
  assert.notEqual(res.data, null);
  return res.data;
}

// decodeWords decodes RFC 2047 encoded words (=?UTF-8?Q?...?= and =?UTF-8?B?...?=) in a header.
function decodeWords(value) {
  return value
    .replace(/\?=\s+=\?/g, '?==?') // whitespace between adjacent encoded words is not text
    .replace(/=\?([^?]+)\?([QqBb])\?([^?]*)\?=/g, (_, charset, enc, text) => {
      assert.match(charset, /^utf-8$/i, `charset of ${value}`);
      if (enc.toUpperCase() === 'B') return Buffer.from(text, 'base64').toString('utf8');
      return decodeQP(text.replace(/_/g, ' '));
    });
}

// decodeQP decodes a quoted-printable text (soft line breaks, =XX bytes) as UTF-8.
function decodeQP(text) {
  const bytes = [];
  const src = text.replace(/=\r?\n/g, '');
  for (let i = 0; i < src.length; i++) {
    if (src[i] === '=' && /^[0-9A-Fa-f]{2}$/.test(src.slice(i + 1, i + 3))) {
      bytes.push(parseInt(src.slice(i + 1, i + 3), 16));
      i += 2;
    } else {
      bytes.push(...Buffer.from(src[i], 'utf8'));
    }
  }
  return Buffer.from(bytes).toString('utf8');
}

// parseEml splits a message into its headers (unfolded; name → list of values, by lower-cased
// name) and its body decoded by Content-Transfer-Encoding; a multipart/alternative one into its
// parts as well ({type, body} each), its body then the HTML part's.
function parseEml(raw) {
  const msg = parsePart(raw);
  const boundary = /^multipart\/alternative;.*boundary="?([^";]+)"?/i.exec(msg.one('Content-Type'))?.[1];
  if (!boundary) return { ...msg, parts: [{ type: msg.one('Content-Type').split(';')[0], body: msg.body }] };
  const parts = raw.split(`--${boundary}`).slice(1, -1).map((p) => {
    const part = parsePart(p.replace(/^\r?\n/, ''));
    return { type: part.one('Content-Type').split(';')[0].toLowerCase(), body: part.body };
  });
  return { ...msg, parts, body: parts.find((p) => p.type === 'text/html')?.body ?? '' };
}

function parsePart(raw) {
  const at = raw.search(/\r?\n\r?\n/);
  assert.ok(at > 0, 'a message has a header and a body');
  const head = raw.slice(0, at).replace(/\r?\n(?=[ \t])/g, '');
  const headers = new Map();
  for (const line of head.split(/\r?\n/)) {
    const colon = line.indexOf(':');
    assert.ok(colon > 0, `header line ${JSON.stringify(line)}`);
    const name = line.slice(0, colon).toLowerCase();
    headers.set(name, [...(headers.get(name) ?? []), line.slice(colon + 1).trim()]);
  }
  const one = (name) => {
    const values = headers.get(name.toLowerCase()) ?? [];
    assert.equal(values.length, 1, `exactly one ${name} header, got ${JSON.stringify(values)}`);
    return values[0];
  };
  let body = raw.slice(at).replace(/^\r?\n\r?\n/, '');
  const cte = (headers.get('content-transfer-encoding') ?? ['7bit'])[0].toLowerCase();
  if (cte === 'quoted-printable') body = decodeQP(body);
  else if (cte === 'base64') body = Buffer.from(body.replace(/\s+/g, ''), 'base64').toString('utf8');
  return { headers, one, body };
}

describe('usesend-js against the local Mailroom server', () => {
  let workDir;
  let dataDir;
  let proc;
  let exited; // resolves with {code, signal} when the server process exits
  let stderr = '';
  const stdout = []; // the server's lines
  let baseURL;
  let us;
  let domain;
  const created = new Set(); // every email id this test created

  // api calls the HTTP API directly with the test's key, for what the SDK does not cover.
  async function api(method, path, { body, headers = {}, key = apiKey } = {}) {
    const res = await fetch(`${baseURL}/api/v1${path}`, {
      method,
      headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json', ...headers },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: res.status, headers: res.headers, body: await res.json() };
  }

  before(async () => {
    workDir = await mkdtemp(join(tmpdir(), 'mailroom-sdk-'));
    dataDir = join(workDir, 'data');
    const bin = join(workDir, 'mailroom');
    await promisify(execFile)(process.env.GO || 'go', ['build', '-o', bin, './cmd/mailroom'], {
      cwd: repoRoot,
    });

    proc = spawn(bin, [], {
      cwd: workDir,
      env: {
        ...process.env,
        BACKEND: 'embedded',
        HOST: '127.0.0.1',
        PORT: '0',
        DATA_DIR: dataDir,
        BOOTSTRAP_API_KEY: apiKey,
        LOG_LEVEL: 'warn',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    exited = once(proc, 'exit').then(([code, signal]) => ({ code, signal }));
    proc.stderr.setEncoding('utf8');
    proc.stderr.on('data', (chunk) => {
      stderr += chunk;
    });

    const lines = createInterface({ input: proc.stdout });
    const firstLine = new Promise((resolve) => {
      lines.on('line', (line) => {
        if (stdout.length === 0) resolve(line);
        stdout.push(line); // and keep draining stdout
      });
    });
    const first = await Promise.race([
      firstLine,
      exited.then(({ code }) => assert.fail(`server exited (${code}) before its banner:\n${stderr}`)),
      expire(30_000, `no banner within 30 s:\n${stderr}`),
    ]);
    // The start line names the version, the address, the backend and the folders.
    const m = /^Mailroom (\S+) listening on (http:\/\/127\.0\.0\.1:\d+) \(backend embedded; data in (.+), messages in (.+)\)$/.exec(first);
    assert.ok(m, `unexpected first line: ${JSON.stringify(first)}`);
    baseURL = m[2];
    assert.equal(m[3], dataDir);

    await waitFor('GET /healthz = 200', async () => {
      try {
        return (await fetch(`${baseURL}/healthz`)).status === 200;
      } catch {
        return false;
      }
    });
    us = new UseSend(apiKey, baseURL);
  }, { timeout: 300_000 });

  after(async () => {
    if (proc && proc.exitCode === null && proc.signalCode === null) {
      proc.kill('SIGTERM');
      const done = await Promise.race([exited, expire(15_000, 'no exit').catch(() => null)]);
      if (!done) {
        proc.kill('SIGKILL');
        await exited;
      }
    }
    if (workDir) await rm(workDir, { recursive: true, force: true });
  });

  it('creates a domain that is verified at once, with DKIM/SPF/DMARC records', async () => {
    domain = ok(await us.domains.create({ name: domainName, region: 'us-east-1' }));
    assert.equal(typeof domain.id, 'number');
    assert.equal(domain.name, domainName);
    assert.equal(domain.status, 'SUCCESS');
    assert.equal(domain.region, 'us-east-1');
    assert.ok(Array.isArray(domain.dnsRecords), 'dnsRecords is an array');
    // A subdomain's records are named in its registrable domain's zone, as upstream names them.
    assert.equal(domain.subdomain, 'sdk-test');
    const dkim = domain.dnsRecords.find((r) => r.type === 'TXT' && r.name === 'mailroom._domainkey.sdk-test');
    assert.ok(dkim, `no DKIM record in ${JSON.stringify(domain.dnsRecords)}`);
    assert.ok(dkim.value.startsWith('p='), `DKIM value ${dkim.value}`);
    assert.equal(dkim.value, `p=${domain.publicKey}`);
    assert.equal(dkim.ttl, 'Auto');
    const mx = domain.dnsRecords.find((r) => r.type === 'MX');
    assert.equal(mx?.value, 'feedback-smtp.us-east-1.amazonses.com');
    assert.ok(domain.dnsRecords.some((r) => r.type === 'TXT' && r.value.startsWith('v=spf1 ')));
    assert.ok(domain.dnsRecords.some((r) => r.type === 'TXT' && r.name === '_dmarc'));
    assert.ok(!('privateKey' in domain), 'the private key never leaves the server');
  });

  it('lists and gets the domain', async () => {
    const list = ok(await us.domains.list());
    assert.ok(Array.isArray(list));
    assert.deepEqual(list.map((d) => d.id), [domain.id]);
    assert.equal(list[0].name, domainName);

    const got = ok(await us.domains.get(domain.id));
    assert.equal(got.id, domain.id);
    assert.equal(got.name, domainName);
    assert.equal(got.status, 'SUCCESS');
    assert.deepEqual(got.dnsRecords, domain.dnsRecords);

    const verified = ok(await us.domains.verify(domain.id));
    assert.equal(typeof verified.message, 'string');
  });

  it('sends an email and writes it to the outbox', async () => {
    const subject = 'Hello from the SDK test';
    const sent = ok(await us.emails.send({ from, to: recipient, subject, text: 'It works.' }));
    assert.equal(typeof sent.emailId, 'string');
    assert.ok(sent.emailId.length > 0);
    created.add(sent.emailId);

    const eml = join(dataDir, 'outbox', `${sent.emailId}.eml`);
    await waitFor(`${eml} to appear`, () => existsSync(eml));
    const raw = await waitFor('a complete .eml', async () => {
      const text = await readFile(eml, 'utf8');
      return /\r?\n\r?\n/.test(text) && text;
    });
    const head = raw.split(/\r?\n\r?\n/)[0];
    assert.match(head, new RegExp(`^Subject: ${subject}$`, 'm'));
    assert.match(head, new RegExp(`^X-Usesend-Email-ID: ${sent.emailId}$`, 'mi'));
    assert.match(head, new RegExp(`^To: .*${recipient.replace('.', '\\.')}`, 'mi'));
  });

  it('sends a batch of two', async () => {
    const res = ok(
      await us.emails.batch([
        { from, to: recipient, subject: 'Batch one', text: 'one' },
        { from, to: [recipient, 'other@example.org'], subject: 'Batch two', html: '<p>two</p>' },
      ]),
    );
    // emails.batch unwraps the wire's {data: [...]}, so data is the array itself.
    assert.ok(Array.isArray(res), `batch data ${JSON.stringify(res)}`);
    assert.equal(res.length, 2);
    for (const item of res) assert.equal(typeof item.emailId, 'string');
    assert.notEqual(res[0].emailId, res[1].emailId);
    for (const item of res) created.add(item.emailId);

    const first = ok(await us.emails.get(res[0].emailId));
    const second = ok(await us.emails.get(res[1].emailId));
    assert.equal(first.subject, 'Batch one');
    assert.equal(second.subject, 'Batch two');
  });

  it('honours the idempotencyKey option', async () => {
    const key = `sdk-test-${Date.now()}`;
    const payload = { from, to: recipient, subject: 'Idempotent', text: 'once' };
    const a = ok(await us.emails.send({ ...payload }, { idempotencyKey: key }));
    const b = ok(await us.emails.send({ ...payload }, { idempotencyKey: key }));
    assert.equal(b.emailId, a.emailId);
    created.add(a.emailId);

    // The replay is marked on the wire (the SDK does not expose response headers).
    const replay = await api('POST', '/emails', { body: payload, headers: { 'Idempotency-Key': key } });
    assert.equal(replay.status, 200);
    assert.equal(replay.body.emailId, a.emailId);
    assert.equal(replay.headers.get('idempotency-replayed'), 'true');

    const conflict = apiError(
      await us.emails.send({ ...payload, subject: 'Something else' }, { idempotencyKey: key }),
    );
    assert.equal(conflict.code, 'NOT_UNIQUE');

    const batchKey = `${key}-batch`;
    const items = [
      { from, to: recipient, subject: 'Idempotent batch 1', text: '1' },
      { from, to: recipient, subject: 'Idempotent batch 2', text: '2' },
    ];
    const c = ok(await us.emails.batch(items, { idempotencyKey: batchKey }));
    const d = ok(await us.emails.batch(items, { idempotencyKey: batchKey }));
    assert.deepEqual(d, c);
    for (const item of c) created.add(item.emailId);
    const batchConflict = apiError(await us.emails.batch(items.slice(0, 1), { idempotencyKey: batchKey }));
    assert.equal(batchConflict.code, 'NOT_UNIQUE');
  });

  it('gets an email until it is DELIVERED, with its events in time order', async () => {
    const sent = ok(await us.emails.send({ from, to: recipient, subject: 'Track me', text: 'hi' }));
    created.add(sent.emailId);
    const detail = await waitFor('latestStatus DELIVERED', async () => {
      const email = ok(await us.emails.get(sent.emailId));
      return email.latestStatus === 'DELIVERED' && email;
    });
    assert.equal(detail.id, sent.emailId);
    assert.equal(detail.subject, 'Track me');
    assert.equal(detail.from, from);
    assert.deepEqual([detail.to].flat(), [recipient]);
    assert.equal(detail.domainId, domain.id);
    assert.equal(detail.scheduledAt, null);

    const events = detail.emailEvents;
    assert.ok(Array.isArray(events));
    const statuses = events.map((e) => e.status);
    for (const s of ['QUEUED', 'SENT', 'DELIVERED']) assert.ok(statuses.includes(s), `${s} in ${statuses}`);
    assert.ok(statuses.indexOf('QUEUED') < statuses.indexOf('SENT'));
    assert.ok(statuses.indexOf('SENT') < statuses.indexOf('DELIVERED'));
    const times = events.map((e) => Date.parse(e.createdAt));
    for (const t of times) assert.ok(Number.isFinite(t));
    assert.deepEqual(times, [...times].sort((x, y) => x - y), 'events are sorted by time');
    for (const e of events) assert.equal(e.emailId, sent.emailId);
  });

  it('lists emails with a count (the SDK has no list method)', async () => {
    assert.equal(typeof us.emails.list, 'undefined', 'usesend-js 1.6.3 has no emails.list');
    const all = await api('GET', '/emails?limit=100');
    assert.equal(all.status, 200);
    assert.equal(all.body.count, created.size);
    assert.deepEqual(new Set(all.body.data.map((e) => e.id)), created);
    const times = all.body.data.map((e) => Date.parse(e.createdAt));
    assert.deepEqual(times, [...times].sort((x, y) => y - x), 'newest first');
    for (const e of all.body.data) {
      assert.equal(typeof e.latestStatus, 'string');
      assert.ok('scheduledAt' in e);
      assert.equal(e.domainId, domain.id);
    }

    const page = await api('GET', `/emails?page=2&limit=2&domainId=${domain.id}`);
    assert.equal(page.status, 200);
    assert.equal(page.body.count, created.size);
    assert.deepEqual(
      page.body.data.map((e) => e.id),
      all.body.data.slice(2, 4).map((e) => e.id),
    );

    const future = new Date(Date.now() + 86_400_000).toISOString();
    const none = await api('GET', `/emails?startDate=${encodeURIComponent(future)}`);
    assert.equal(none.status, 200);
    assert.equal(none.body.count, 0);
    assert.deepEqual(none.body.data, []);

    const badPage = await api('GET', '/emails?page=0');
    assert.equal(badPage.status, 400);
    assert.equal(badPage.body.error.code, 'BAD_REQUEST');
  });

  it('reads the analytics through us.analytics', async () => {
    // Every email so far was sent; the one awaited above was delivered.
    const today = new Date().toLocaleString('en-US', { month: 'short', day: '2-digit', timeZone: 'UTC' });
    // Delivery is asynchronous: wait until every email is counted sent.
    const week = await waitFor('every email counted sent', async () => {
      const w = ok(await us.analytics.emailTimeSeries({ days: '7', domainId: String(domain.id) }));
      return w.totalCounts.sent === created.size && w;
    });
    assert.equal(week.result.length, 8);
    assert.equal(week.result[7].date, today, 'upstream formats dates as "MMM dd"');
    for (const k of ['sent', 'delivered', 'opened', 'clicked', 'bounced', 'complained']) {
      assert.equal(typeof week.result[0][k], 'number');
      assert.equal(typeof week.totalCounts[k], 'number');
    }
    assert.ok(week.totalCounts.delivered >= 1, JSON.stringify(week.totalCounts));
    const month = ok(await us.analytics.emailTimeSeries());
    assert.equal(month.result.length, 31);
    assert.deepEqual(month.totalCounts, week.totalCounts);
    const rep = ok(await us.analytics.reputationMetrics({ domainId: String(domain.id) }));
    assert.equal(rep.delivered, week.totalCounts.delivered);
    assert.equal(rep.hardBounced, 0);
    assert.equal(rep.bounceRate, 0);
    assert.equal(typeof rep.complaintRate, 'number');
    const bad = apiError(await us.analytics.emailTimeSeries({ days: '14' }));
    assert.equal(bad.code, 'BAD_REQUEST');
    assert.match(bad.message, /days/);
  });

  it('delivers webhooks that the SDK verifies with its own verifier', async () => {
    const got = [];
    const server = createServer((req, res) => {
      let body = '';
      req.setEncoding('utf8');
      req.on('data', (chunk) => { body += chunk; });
      req.on('end', () => {
        got.push({ headers: req.headers, body });
        res.writeHead(200).end('ok');
      });
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    try {
      const url = `http://127.0.0.1:${server.address().port}/hooks`;
      const hook = await api('POST', '/webhooks', { body: { url, eventTypes: ['email.sent', 'email.delivered'] } });
      assert.equal(hook.status, 200, JSON.stringify(hook.body));
      assert.match(hook.body.secret, /^whsec_[0-9a-f]{64}$/);
      const sent = ok(await us.emails.send({ from, to: recipient, subject: 'Webhook', text: 'hello' }));
      created.add(sent.emailId);
      await waitFor('the delivered webhook', () =>
        got.some((g) => g.headers['x-usesend-event'] === 'email.delivered' && g.body.includes(sent.emailId)));
      const verifier = us.webhooks(hook.body.secret);
      const mine = got.filter((g) => g.body.includes(sent.emailId));
      assert.deepEqual(mine.map((g) => g.headers['x-usesend-event']), ['email.sent', 'email.delivered']);
      for (const g of mine) {
        const event = verifier.constructEvent(g.body, { headers: g.headers });
        assert.equal(event.data.id, sent.emailId);
        assert.equal(event.type, g.headers['x-usesend-event']);
        assert.equal(event.version, '2026-01-18');
        assert.equal(event.attempt, 1);
        assert.equal(event.id, g.headers['x-usesend-call']);
      }
      // A body changed on the way, or another secret, is refused by the same verifier.
      assert.throws(() => verifier.constructEvent(mine[0].body.replace('email.sent', 'email.opened'), { headers: mine[0].headers }));
      assert.throws(() => us.webhooks('whsec_' + '0'.repeat(64)).constructEvent(mine[0].body, { headers: mine[0].headers }));
      const del = await api('DELETE', `/webhooks/${hook.body.id}`);
      assert.equal(del.status, 200);
    } finally {
      server.close();
    }
  });

  it('reports a bad request with the offending field', async () => {
    const err = apiError(await us.emails.send({ from, to: 'not-an-address', subject: 'x', text: 'x' }));
    assert.equal(err.code, 'BAD_REQUEST');
    assert.match(err.message, /\bto\b/);

    const unknownDomain = apiError(
      await us.emails.send({ from: 'a@unknown.example.net', to: recipient, subject: 'x', text: 'x' }),
    );
    assert.equal(unknownDomain.code, 'BAD_REQUEST');
    assert.match(unknownDomain.message, /unknown\.example\.net/);
  });

  it('rejects a wrong key with FORBIDDEN', async () => {
    const stranger = new UseSend(otherKey, baseURL);
    assert.equal(apiError(await stranger.domains.list()).code, 'FORBIDDEN');
    const err = apiError(await stranger.emails.send({ from, to: recipient, subject: 'x', text: 'x' }));
    assert.equal(err.code, 'FORBIDDEN');
  });

  it('reports an unknown email or domain as NOT_FOUND', async () => {
    assert.equal(apiError(await us.emails.get('em-does-not-exist')).code, 'NOT_FOUND');
    assert.equal(apiError(await us.domains.get(987654)).code, 'NOT_FOUND');
  });

  it('deletes a domain', async () => {
    const extra = ok(await us.domains.create({ name: 'delete-me.example.com', region: 'us-east-1' }));
    const dup = apiError(await us.domains.create({ name: 'delete-me.example.com', region: 'us-east-1' }));
    assert.equal(dup.code, 'NOT_UNIQUE');
    const deleted = ok(await us.domains.delete(extra.id));
    assert.equal(deleted.id, extra.id);
    assert.equal(deleted.success, true);
    assert.equal(typeof deleted.message, 'string');
    assert.equal(apiError(await us.domains.get(extra.id)).code, 'NOT_FOUND');
    assert.deepEqual(ok(await us.domains.list()).map((d) => d.id), [domain.id]);
  });

  // Campaigns and contact books: the acceptance scenario, through the SDK's contactBooks,
  // contacts and campaigns modules (fetch only for the unsubscribe link, which a mail client
  // follows, not the SDK).
  describe('campaigns', () => {
    const audience = [
      // first name, email, company (a property), subscribed
      { firstName: 'Ann', lastName: 'Lee', email: 'ann@campaign.example.org', company: 'Acme', subscribed: true },
      { firstName: 'Bob', lastName: 'Ray', email: 'bob@campaign.example.org', company: undefined, subscribed: true },
      { firstName: 'Zoë', lastName: 'Ng', email: 'zoe@campaign.example.org', company: 'Initech', subscribed: true },
      { firstName: 'Dan', lastName: 'Ode', email: 'dan@campaign.example.org', company: 'Umbrella', subscribed: false },
    ];
    const subscribed = audience.filter((c) => c.subscribed);
    const subjectTemplate = 'Hello {{firstName}}, news for {{company,fallback=friend}}';
    const htmlTemplate =
      '<p>Dear {{firstName}} at {{company,fallback=friend}},</p><p>Our news.</p>' +
      '<p><a href="{{usesend_unsubscribe_url}}">Unsubscribe</a></p>';
    const expectedSubject = (c) => `Hello ${c.firstName}, news for ${c.company ?? 'friend'}`;
    const expectedGreeting = (c) => `Dear ${c.firstName} at ${c.company ?? 'friend'},`;
    const counters = ['total', 'sent', 'delivered', 'opened', 'clicked', 'unsubscribed', 'bounced', 'hardBounced', 'complained'];

    let book;
    let campaign;
    const contactIds = new Map(); // email → contact id
    const messages = new Map(); // email → parsed outbox message of the campaign

    // outboxTo reads every .eml of the outbox addressed to one of emails.
    async function outboxTo(emails) {
      const dir = join(dataDir, 'outbox');
      const found = [];
      for (const name of await readdir(dir)) {
        if (!name.endsWith('.eml')) continue;
        const msg = parseEml(await readFile(join(dir, name), 'utf8'));
        const to = decodeWords(msg.one('To'));
        const addr = emails.find((e) => to.includes(`<${e}>`) || to === e);
        if (addr) found.push({ file: name, addr, to, ...msg });
      }
      return found;
    }

    async function getCampaign(id) {
      return ok(await us.campaigns.get(id));
    }

    function assertCampaignShape(c) {
      for (const k of counters) assert.equal(typeof c[k], 'number', `${k} in ${JSON.stringify(c)}`);
      for (const k of ['replyTo', 'cc', 'bcc']) assert.ok(Array.isArray(c[k]), `${k} is an array`);
      for (const k of ['createdAt', 'updatedAt']) assert.ok(Number.isFinite(Date.parse(c[k])), `${k} ${c[k]}`);
      assert.equal(typeof c.batchSize, 'number');
      assert.equal(typeof c.batchWindowMinutes, 'number');
    }

    it('creates a contact book and contacts, one of them unsubscribed', async () => {
      book = ok(await us.contactBooks.create({ name: 'SDK newsletter', emoji: '📬', variables: ['company'] }));
      assert.equal(typeof book.id, 'string');
      assert.equal(book.name, 'SDK newsletter');
      assert.equal(book.emoji, '📬');
      assert.deepEqual(book.variables, ['company']);

      // One at a time (contacts.create) and in bulk (contacts.bulkCreate).
      const [ann, bob, zoe, dan] = audience;
      const payload = (c) => ({
        email: c.email,
        firstName: c.firstName,
        lastName: c.lastName,
        ...(c.company ? { properties: { company: c.company } } : {}),
        ...(c.subscribed ? {} : { subscribed: false }),
      });
      for (const c of [ann, dan]) {
        const res = ok(await us.contacts.create(book.id, payload(c)));
        assert.equal(typeof res.contactId, 'string');
        contactIds.set(c.email, res.contactId);
      }
      const bulk = ok(await us.contacts.bulkCreate(book.id, [payload(bob), payload(zoe)]));
      assert.equal(bulk.count, 2, JSON.stringify(bulk));
      assert.equal(typeof bulk.message, 'string');

      // The bulk answer has no ids: find them by email through the list route (no SDK method).
      const listed = await api('GET', `/contactBooks/${book.id}/contacts?emails=${bob.email},${zoe.email}`);
      assert.equal(listed.status, 200);
      assert.equal(listed.body.length, 2);
      for (const c of listed.body) contactIds.set(c.email, c.id);

      for (const c of audience) {
        const got = ok(await us.contacts.get(book.id, contactIds.get(c.email)));
        assert.equal(got.id, contactIds.get(c.email));
        assert.equal(got.email, c.email);
        assert.equal(got.firstName, c.firstName);
        assert.equal(got.lastName, c.lastName);
        assert.equal(got.subscribed, c.subscribed, c.email);
        assert.deepEqual(got.properties, c.company ? { company: c.company } : {});
        assert.equal(got.contactBookId, book.id);
      }

      const again = ok(await us.contactBooks.get(book.id));
      assert.equal(again.id, book.id);
      assert.equal(again._count?.contacts, audience.length);
      assert.ok(ok(await us.contactBooks.list()).some((b) => b.id === book.id));
    });

    it('refuses a campaign without the unsubscribe placeholder', async () => {
      const err = apiError(
        await us.campaigns.create({
          name: 'No unsubscribe', from, subject: 'x', contactBookId: book.id, html: '<p>hi</p>', sendNow: true,
        }),
      );
      assert.equal(err.code, 'BAD_REQUEST');
      assert.match(err.message, /usesend_unsubscribe_url/);
    });

    it('sends a personalised campaign now, in batches of 2, to the subscribed contacts only', async () => {
      campaign = ok(
        await us.campaigns.create({
          name: 'SDK launch',
          from,
          subject: subjectTemplate,
          contactBookId: book.id,
          html: htmlTemplate,
          sendNow: true,
          batchSize: 2,
        }),
      );
      assertCampaignShape(campaign);
      assert.equal(typeof campaign.id, 'string');
      assert.equal(campaign.name, 'SDK launch');
      assert.equal(campaign.from, from);
      assert.equal(campaign.subject, subjectTemplate);
      assert.equal(campaign.html, htmlTemplate);
      assert.equal(campaign.contactBookId, book.id);
      assert.equal(campaign.batchSize, 2);
      assert.ok(['SCHEDULED', 'RUNNING', 'SENT'].includes(campaign.status), campaign.status);
      assert.ok(campaign.scheduledAt === null || Number.isFinite(Date.parse(campaign.scheduledAt)));

      // SENT once its last batch is written; its sent counter follows the deliveries.
      const sent = await waitFor('campaign status SENT', async () => {
        const c = await getCampaign(campaign.id);
        return c.status === 'SENT' && c;
      }, 30_000);
      assertCampaignShape(sent);
      assert.equal(sent.total, subscribed.length, JSON.stringify(sent));
      assert.ok(sent.sent <= subscribed.length, JSON.stringify(sent));
      const delivered = await waitFor(`delivered = ${subscribed.length}`, async () => {
        const c = await getCampaign(campaign.id);
        return c.delivered === subscribed.length && c;
      }, 30_000);
      assert.equal(delivered.status, 'SENT');
      assert.equal(delivered.total, subscribed.length);
      assert.equal(delivered.sent, subscribed.length);
      for (const k of ['opened', 'clicked', 'unsubscribed', 'bounced', 'hardBounced', 'complained']) {
        assert.equal(delivered[k], 0, `${k} in ${JSON.stringify(delivered)}`);
      }
    });

    it('writes exactly one personalised message per subscribed contact, with the unsubscribe headers', async () => {
      const found = await outboxTo(audience.map((c) => c.email));
      assert.deepEqual(
        found.map((m) => m.addr).sort(),
        subscribed.map((c) => c.email).sort(),
        `one message per subscribed contact and none for ${audience.find((c) => !c.subscribed).email}: ${found.map((m) => m.file)}`,
      );
      for (const c of subscribed) {
        const m = found.find((f) => f.addr === c.email);
        messages.set(c.email, m);
        assert.equal(decodeWords(m.one('Subject')), expectedSubject(c), m.file);
        assert.equal(m.to.replace(/^<(.*)>$/, '$1'), c.email, `To ${m.to} is the bare ${c.email}`);
        assert.match(m.one('From'), /<hello@sdk-test\.example\.com>$/);
        // HTML, with a text part made from it, as upstream sends campaign emails.
        assert.match(m.one('Content-Type'), /^multipart\/alternative\b/i);
        assert.deepEqual(m.parts.map((p) => p.type), ['text/plain', 'text/html'], m.file);
        assert.ok(m.parts[0].body.includes(expectedGreeting(c)), `text part of ${m.file}: ${m.parts[0].body}`);
        assert.ok(m.body.includes(expectedGreeting(c)), `body of ${m.file}: ${m.body}`);
        assert.ok(!m.body.includes('{{'), `no placeholder left in ${m.body}`);

        const unsub = m.one('List-Unsubscribe');
        const url = /^<(https?:\/\/[^>\s]+)>$/.exec(unsub)?.[1];
        assert.ok(url, `List-Unsubscribe ${unsub}`);
        assert.ok(url.startsWith(`${baseURL}/unsubscribe/`), `${url} points at this server`);
        assert.ok(m.body.includes(`href="${url}"`), `the body links the same unsubscribe URL: ${m.body}`);
        assert.equal(m.one('List-Unsubscribe-Post'), 'List-Unsubscribe=One-Click');
        assert.equal(m.one('Precedence'), 'bulk');
        m.url = url;

        // The message is an ordinary email of the team too.
        const id = m.one('X-Usesend-Email-ID');
        assert.equal(m.file, `${id}.eml`);
        const email = ok(await us.emails.get(id));
        assert.equal(email.subject, expectedSubject(c));
        assert.equal(email.latestStatus, 'DELIVERED');
        // Its to is the contact's bare address, as upstream writes it (a webhook's data.to too).
        assert.deepEqual(email.to, [c.email]);
      }
      const urls = new Set([...messages.values()].map((m) => m.url));
      assert.equal(urls.size, subscribed.length, 'every recipient has an own unsubscribe link');
    });

    it('unsubscribes a contact with the one-click POST of List-Unsubscribe', async () => {
      const ann = subscribed[0];
      const { url } = messages.get(ann.email);

      // GET only shows a form (link scanners unsubscribe nobody).
      const form = await fetch(url);
      assert.equal(form.status, 200);
      assert.match(form.headers.get('content-type'), /^text\/html/);
      assert.match(await form.text(), /<form method="post"/i);
      assert.equal(ok(await us.contacts.get(book.id, contactIds.get(ann.email))).subscribed, true);

      const oneClick = () =>
        fetch(url, {
          method: 'POST',
          headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
          body: 'List-Unsubscribe=One-Click',
        });
      const res = await oneClick();
      assert.equal(res.status, 200, await res.text());

      const contact = ok(await us.contacts.get(book.id, contactIds.get(ann.email)));
      assert.equal(contact.subscribed, false);
      // Nobody else was unsubscribed.
      for (const c of subscribed.slice(1)) {
        assert.equal(ok(await us.contacts.get(book.id, contactIds.get(c.email))).subscribed, true, c.email);
      }
      const after1 = await waitFor('unsubscribed = 1', async () => {
        const c = await getCampaign(campaign.id);
        return c.unsubscribed === 1 && c;
      });
      assert.equal(after1.total, subscribed.length);

      // A second click (or a client's retry) counts once.
      const again = await oneClick();
      assert.equal(again.status, 200, await again.text());
      await sleep(200);
      assert.equal((await getCampaign(campaign.id)).unsubscribed, 1);

      // A forged link is refused and changes nothing.
      const forged = await fetch(url.replace(/.$/, (ch) => (ch === 'A' ? 'B' : 'A')), {
        method: 'POST',
        headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
        body: 'List-Unsubscribe=One-Click',
      });
      assert.equal(forged.status, 404);
      await forged.text();

      const list = ok(await us.campaigns.getAll());
      assert.equal(typeof list.totalPage, 'number');
      assert.ok(list.totalPage >= 1);
      const item = list.campaigns.find((c) => c.id === campaign.id);
      assert.ok(item, `campaign ${campaign.id} in ${JSON.stringify(list)}`);
      assert.equal(item.status, 'SENT');
      assert.equal(item.total, subscribed.length);
      assert.equal(item.sent, subscribed.length);
      assert.equal(item.delivered, subscribed.length);
      assert.equal(item.unsubscribed, 1);
    });

    it('schedules a campaign for "tomorrow 9am" (UTC) and reschedules it', async () => {
      const tomorrow9 = () => {
        const now = new Date();
        return Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() + 1, 9, 0, 0);
      };
      const before9 = tomorrow9();
      const scheduled = ok(
        await us.campaigns.create({
          name: 'SDK tomorrow',
          from,
          subject: subjectTemplate,
          contactBookId: book.id,
          html: htmlTemplate,
          scheduledAt: 'tomorrow 9am',
        }),
      );
      const after9 = tomorrow9(); // differs from before9 only across midnight UTC
      assertCampaignShape(scheduled);
      assert.equal(scheduled.status, 'SCHEDULED');
      assert.match(scheduled.scheduledAt ?? '', /T09:00:00(\.000)?Z$/, `scheduledAt ${scheduled.scheduledAt}`);
      assert.ok(
        [before9, after9].includes(Date.parse(scheduled.scheduledAt)),
        `scheduledAt ${scheduled.scheduledAt}, want ${new Date(before9).toISOString()}`,
      );
      assert.equal(scheduled.total, 0);
      assert.equal(scheduled.sent, 0);

      const got = await getCampaign(scheduled.id);
      assert.equal(got.status, 'SCHEDULED');
      assert.equal(got.scheduledAt, scheduled.scheduledAt);

      const later = new Date(Date.now() + 2 * 86_400_000);
      later.setUTCHours(10, 30, 0, 0);
      const res = ok(await us.campaigns.schedule(scheduled.id, { scheduledAt: later.toISOString().replace('.000', '') }));
      assert.deepEqual(res, { success: true });
      const moved = await getCampaign(scheduled.id);
      assert.equal(moved.status, 'SCHEDULED');
      assert.equal(Date.parse(moved.scheduledAt), later.getTime(), `scheduledAt ${moved.scheduledAt}`);

      const list = ok(await us.campaigns.getAll({ status: 'SCHEDULED' }));
      assert.deepEqual(list.campaigns.map((c) => c.id), [scheduled.id]);

      const deleted = ok(await us.campaigns.delete(scheduled.id));
      assert.equal(deleted.id, scheduled.id);
      assert.equal(apiError(await us.campaigns.get(scheduled.id)).code, 'NOT_FOUND');
      // Nothing was sent for it.
      assert.equal((await getCampaign(campaign.id)).total, subscribed.length);
    });

    it('pauses and resumes a running campaign', async () => {
      const slowBook = ok(await us.contactBooks.create({ name: 'SDK slow' }));
      const people = Array.from({ length: 5 }, (_, i) => ({ email: `p${i + 1}@pause.example.org`, firstName: `P${i + 1}` }));
      assert.equal(ok(await us.contacts.bulkCreate(slowBook.id, people)).count, people.length);

      // One contact a minute: the campaign stays RUNNING between the steps below.
      const slow = ok(
        await us.campaigns.create({
          name: 'SDK slow',
          from,
          subject: 'Hi {{firstName}}',
          contactBookId: slowBook.id,
          html: '<p>Hi {{firstName}}</p><a href="{{usesend_unsubscribe_url}}">Unsubscribe</a>',
          sendNow: true,
          batchSize: 1,
          batchWindowMinutes: 1,
        }),
      );
      assert.equal(slow.batchSize, 1);
      assert.equal(slow.batchWindowMinutes, 1);
      // Its total is its audience from the start, as upstream sets it when sending starts; the
      // batches show in sent.
      const first = await waitFor('the first batch', async () => {
        const c = await getCampaign(slow.id);
        return c.status === 'RUNNING' && c.sent === 1 && c;
      });
      assert.equal(first.total, people.length);

      assert.deepEqual(ok(await us.campaigns.pause(slow.id)), { success: true });
      const paused = await getCampaign(slow.id);
      assert.equal(paused.status, 'PAUSED');
      assert.equal(paused.sent, 1);
      // A retried pause succeeds and changes nothing, as upstream answers it.
      assert.deepEqual(ok(await us.campaigns.pause(slow.id)), { success: true });
      assert.equal((await getCampaign(slow.id)).status, 'PAUSED');
      assert.equal(
        ok(await us.campaigns.getAll({ status: 'PAUSED' })).campaigns.some((c) => c.id === slow.id),
        true,
      );

      assert.deepEqual(ok(await us.campaigns.resume(slow.id)), { success: true });
      assert.equal((await getCampaign(slow.id)).status, 'RUNNING');
      assert.deepEqual(ok(await us.campaigns.resume(slow.id)), { success: true }); // a retried resume too
      assert.equal((await getCampaign(slow.id)).status, 'RUNNING');
      // Resume continues from the cursor at once: the second contact, and then the window.
      const second = await waitFor('the second batch after resume', async () => {
        const c = await getCampaign(slow.id);
        return c.sent === 2 && c;
      });
      assert.equal(second.status, 'RUNNING');
      await sleep(1000);
      const still = await getCampaign(slow.id);
      assert.equal(still.sent, 2, 'the next batch waits for the batch window');
      assert.equal(still.status, 'RUNNING');

      // Contacts go in email order: p1 before the pause, p2 after the resume, nobody else yet.
      const found = await waitFor('the two messages of the slow campaign in the outbox', async () => {
        const list = await outboxTo(people.map((p) => p.email));
        return list.length >= 2 && list;
      });
      assert.deepEqual(found.map((m) => m.addr).sort(), [people[0].email, people[1].email]);
      for (const m of found) {
        const p = people.find((x) => x.email === m.addr);
        assert.equal(decodeWords(m.one('Subject')), `Hi ${p.firstName}`);
      }
    });
  });

  // runSnippet writes code next to the installed SDK and runs it with node as a user would.
  async function runSnippet(name, code, env = {}) {
    const file = join(dirname(fileURLToPath(import.meta.url)), `.snippet-${name}.mjs`);
    await writeFile(file, code);
    try {
      const { stdout: out } = await promisify(execFile)(process.execPath, [file], {
        env: { ...process.env, ...env },
        timeout: 30_000,
      });
      return out;
    } finally {
      await rm(file, { force: true });
    }
  }

  it("runs the banner's snippet as written", async () => {
    const start = stdout.findIndex((l) => l.startsWith('Try it:'));
    assert.ok(start >= 0, `no snippet in the banner: ${stdout.join('\n')}`);
    const code = [];
    for (const line of stdout.slice(start + 1)) {
      if (!line.startsWith('  ')) break;
      code.push(line.slice(2));
    }
    // Started with BOOTSTRAP_API_KEY, the banner's snippet reads the key from the environment.
    const out = await runSnippet('banner', code.join('\n'), { USESEND_API_KEY: apiKey });
    const id = /emailId: '([^']+)'/.exec(out)?.[1];
    assert.ok(id, `the snippet printed ${out}`);
    created.add(id);
  });

  it("runs the README's first snippet as written (on this server's port)", async () => {
    const readme = await readFile(join(repoRoot, 'README.md'), 'utf8');
    const code = /```js\n([\s\S]*?)```/.exec(readme)[1].replaceAll('http://127.0.0.1:3000', baseURL);
    const out = await runSnippet('readme', code, { USESEND_API_KEY: apiKey });
    const id = /emailId: '([^']+)'/.exec(out)?.[1];
    assert.ok(id, `the README's snippet printed ${out}`);
    created.add(id);
  });

  it('shuts down cleanly on SIGTERM, saying what is still queued', async () => {
    proc.kill('SIGTERM');
    const { code, signal } = await Promise.race([
      exited,
      expire(30_000, 'server did not exit within 30 s of SIGTERM'),
    ]);
    assert.deepEqual({ code, signal }, { code: 0, signal: null }, stderr);
    await sleep(50); // the last lines of stdout
    assert.ok(stdout.some((l) => l.startsWith('Mailroom stopping')), stdout.join('\n'));
    assert.match(stdout.at(-1), /^Mailroom stopped: (nothing queued|\d+ emails still queued, sent after the next start)$/);
  });
});
