// The older SDK: `unsend` 1.5.1, useSend's SDK before its rename (pinned in package.json), which
// apps written then still use. It has emails and contacts only, and the same error quirk as
// usesend-js (an error result is the whole body: {error: {error: {code, message}}}).
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';

import { Unsend } from 'unsend';

import { startServer } from './server.mjs';

const apiKey = 'us_oldsdktest_0123456789abcdef0123456789abcdef';
const from = 'Old SDK <hello@oldsdk.example.com>';

function ok(res) {
  assert.equal(res.error, null, `SDK error: ${JSON.stringify(res.error)}`);
  return res.data;
}

function apiError(res) {
  assert.equal(res.data, null, `expected an error, got ${JSON.stringify(res.data)}`);
  return res.error.error;
}

describe('unsend 1.5.1 (the SDK before the rename) against the local server', () => {
  let server;
  let un;
  let call; // the API, for what this SDK does not cover

  before(async () => {
    server = await startServer('oldsdk', apiKey);
    un = new Unsend(apiKey, server.baseURL);
    call = async (method, path, body) => {
      const res = await fetch(`${server.baseURL}/api/v1${path}`, {
        method,
        headers: { Authorization: `Bearer ${apiKey}`, 'Content-Type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      return { status: res.status, body: await res.json() };
    };
    const d = await call('POST', '/domains', { name: 'oldsdk.example.com', region: 'us-east-1' });
    assert.equal(d.status, 200, JSON.stringify(d.body));
  }, { timeout: 300_000 });

  after(async () => {
    await server?.stop();
  });

  it('sends, reads, reschedules and cancels emails', async () => {
    const { emailId } = ok(await un.emails.send({ from, to: 'someone@example.org', subject: 'Hi', text: 'from unsend' }));
    assert.match(emailId, /^\w+$/);
    let got;
    for (let i = 0; i < 200; i++) {
      got = ok(await un.emails.get(emailId));
      if (got.latestStatus === 'DELIVERED') break;
      await new Promise((r) => setTimeout(r, 25));
    }
    assert.equal(got.latestStatus, 'DELIVERED');
    assert.deepEqual(got.to, ['someone@example.org']);
    assert.equal(got.subject, 'Hi');
    assert.deepEqual(got.emailEvents.map((e) => e.status), ['QUEUED', 'SENT', 'DELIVERED']);

    const later = new Date(Date.now() + 3_600_000);
    const sched = ok(await un.emails.create({ from, to: ['a@example.org'], subject: 'Later', html: '<p>x</p>',
      scheduledAt: later.toISOString() }));
    assert.equal(ok(await un.emails.get(sched.emailId)).latestStatus, 'SCHEDULED');
    const twoHours = new Date(Date.now() + 7_200_000).toISOString();
    assert.equal(ok(await un.emails.update(sched.emailId, { scheduledAt: twoHours })).emailId, sched.emailId);
    // Kept to the second (schedules fire to the second), rounded up: never before the time asked.
    assert.equal(Date.parse(ok(await un.emails.get(sched.emailId)).scheduledAt), Math.ceil(Date.parse(twoHours) / 1000) * 1000);
    assert.equal(ok(await un.emails.cancel(sched.emailId)).emailId, sched.emailId);
    assert.equal(ok(await un.emails.get(sched.emailId)).latestStatus, 'CANCELLED');
  });

  it('sends a batch and gets its ids in order', async () => {
    const res = await un.emails.batch([
      { from, to: 'b1@example.org', subject: 'B1', text: '1' },
      { from, to: 'b2@example.org', subject: 'B2', text: '2' },
    ]);
    const data = ok(res);
    assert.equal(data.length, 2);
    const subjects = [];
    for (const { emailId } of data) subjects.push(ok(await un.emails.get(emailId)).subject);
    assert.deepEqual(subjects, ['B1', 'B2']);
  });

  it('gets errors in the shape it parses', async () => {
    const missing = apiError(await un.emails.send({ from, to: 'a@example.org', text: 'no subject' }));
    assert.equal(missing.code, 'BAD_REQUEST');
    assert.match(missing.message, /^subject/);
    assert.equal(apiError(await un.emails.get('emnosuchemail0000000000000')).code, 'NOT_FOUND');
    const foreign = apiError(await un.emails.send({ from: 'x@elsewhere.example.net', to: 'a@example.org', subject: 's', text: 't' }));
    assert.match(foreign.message, /^from/);
  });

  it('creates, reads, changes, upserts and deletes a contact', async () => {
    const book = await call('POST', '/contactBooks', { name: 'old sdk' });
    assert.equal(book.status, 200, JSON.stringify(book.body));
    const bookId = book.body.id;
    const { contactId } = ok(await un.contacts.create(bookId, { email: 'ann@example.org', firstName: 'Ann' }));
    let c = ok(await un.contacts.get(bookId, contactId));
    assert.equal(c.email, 'ann@example.org');
    assert.equal(c.firstName, 'Ann');
    assert.equal(c.subscribed, true);
    assert.equal(ok(await un.contacts.update(bookId, contactId, { lastName: 'Lee', subscribed: false })).contactId, contactId);
    c = ok(await un.contacts.get(bookId, contactId));
    assert.equal(c.lastName, 'Lee');
    assert.equal(c.subscribed, false);
    assert.equal(ok(await un.contacts.upsert(bookId, contactId, { email: 'ann@example.org', firstName: 'Anne' })).contactId, contactId);
    assert.equal(ok(await un.contacts.get(bookId, contactId)).firstName, 'Anne');
    assert.equal(ok(await un.contacts.delete(bookId, contactId)).success, true);
    assert.equal(apiError(await un.contacts.get(bookId, contactId)).code, 'NOT_FOUND');
  });
});
