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
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
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

describe('usesend-js against the local Mailroom server', () => {
  let workDir;
  let dataDir;
  let proc;
  let exited; // resolves with {code, signal} when the server process exits
  let stderr = '';
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
    const first = await Promise.race([
      once(lines, 'line').then(([line]) => line),
      exited.then(({ code }) => assert.fail(`server exited (${code}) before its banner:\n${stderr}`)),
      expire(30_000, `no banner within 30 s:\n${stderr}`),
    ]);
    lines.on('line', () => {}); // keep draining stdout
    const m = /^Mailroom is listening on (http:\/\/127\.0\.0\.1:\d+) \(backend embedded\)$/.exec(first);
    assert.ok(m, `unexpected first line: ${JSON.stringify(first)}`);
    baseURL = m[1];

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
    const dkim = domain.dnsRecords.find((r) => r.type === 'TXT' && r.name === 'mailroom._domainkey');
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

  it('shuts down cleanly on SIGTERM', async () => {
    proc.kill('SIGTERM');
    const { code, signal } = await Promise.race([
      exited,
      expire(30_000, 'server did not exit within 30 s of SIGTERM'),
    ]);
    assert.deepEqual({ code, signal }, { code: 0, signal: null }, stderr);
  });
});
