// The README's snippets, run as written against a local server of the current code (issue 14:
// "every snippet in the README runs as written"). Every ```js block runs with node next to the
// installed SDK (a block that continues an earlier one, without its own import, runs after
// the first snippet's two lines that make `us`), and every ```sh block that talks to the local
// API runs with sh, $KEY set, in the README's order, so that one block finds what an earlier
// one made (the domain of the first snippet). The server listens on a free port, which the
// snippets' 127.0.0.1:3000 is replaced with. What cannot run here is named below with why.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { lookup } from 'node:dns/promises';
import { readFile, rm, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

import { repoRoot, startServer } from './server.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const apiKey = 'us_readmetest_0123456789abcdef0123456789abcdef';
const run = promisify(execFile);

// Blocks that do not run against the local server, by a line they contain, and why.
const notHere = [
  [/^make (run|test)/m, 'the set-up commands themselves (make test runs this test)'],
  [/\$API|aws sesv2|^STACK=/m, 'needs a deployed stack and an AWS account'],
  [/^moto_server/m, 'the AWS backend against moto (covered by the Go tests on moto)'],
  [/mailroom-admin/, 'the admin CLI (cmd/mailroom-admin tests run it against a live server)'],
  [/^sam |^make sam-local|sam local/m, 'needs Docker and the SAM CLI'],
  [/rawBody/, "a fragment of the reader's webhook handler (the SDK test verifies a received call with the same constructEvent)"],
];

// A webhook's URL must resolve (the server refuses private and unknown hosts): the README's
// example.com does wherever there is DNS, which this test's machine may not have.
const dns = await lookup('example.com').then(() => true, () => false);
if (!dns) notHere.push([/"url":"https:\/\/example\.com/, 'its webhook URL does not resolve on this machine (no DNS)']);

const readme = await readFile(join(repoRoot, 'README.md'), 'utf8');
const blocks = [...readme.matchAll(/^( *)```(\w*)\n([\s\S]*?)^ *```/gm)]
  .map((m) => ({ lang: m[2], code: m[3].split('\n').map((l) => l.slice(m[1].length)).join('\n') }))
  .filter((b) => b.lang === 'js' || b.lang === 'sh');

describe("the README's snippets against a local server", () => {
  let server;
  let baseURL;

  before(async () => {
    // API_RATE_LIMIT as the README's rate-limit snippet says to start it (every block here
    // makes a few requests, one block at a time).
    server = await startServer('readme', apiKey, { API_RATE_LIMIT: '10' });
    baseURL = server.baseURL;
  }, { timeout: 300_000 });

  after(async () => {
    await server?.stop();
  });

  const local = (code) => code.replaceAll('http://127.0.0.1:3000', baseURL).replaceAll('localhost:3000', baseURL.slice('http://'.length));

  it('finds the snippets', () => {
    assert.ok(blocks.filter((b) => b.lang === 'js').length >= 5, 'js blocks');
    assert.ok(blocks.filter((b) => b.lang === 'sh').length >= 10, 'sh blocks');
  });

  // The first js block makes the client the later fragments use.
  const firstJS = blocks.find((b) => b.lang === 'js').code;
  const clientLines = firstJS.split('\n').filter((l) => /^import |^const us = /.test(l)).join('\n');

  blocks.forEach((b, i) => {
    const skip = notHere.find(([re]) => re.test(b.code));
    const title = `${b.lang} block ${i + 1}: ${b.code.trim().split('\n')[0].slice(0, 70)}`;
    if (skip) {
      it(`${title}: parses; not run here, ${skip[1]}`, async () => { // it must parse
        if (b.lang === 'sh') {
          await run('sh', ['-nc', b.code]);
          return;
        }
        const file = join(here, `.readme-${i}.mjs`);
        await writeFile(file, b.code);
        try {
          await run(process.execPath, ['--check', file]);
        } finally {
          await rm(file, { force: true });
        }
      });
      return;
    }
    it(title, async () => {
      if (b.lang === 'js') {
        const code = local(/^import /m.test(b.code) ? b.code : `${clientLines}\n${b.code}`);
        const file = join(here, `.readme-${i}.mjs`);
        await writeFile(file, code);
        try {
          const { stdout: out, stderr: err } = await run(process.execPath, [file], {
            cwd: here, env: { ...process.env, USESEND_API_KEY: apiKey }, timeout: 30_000 });
          assert.doesNotMatch(out + err, /error|Error/, `block ${i + 1} printed:\n${out}${err}`);
        } finally {
          await rm(file, { force: true });
        }
        return;
      }
      // Each block starts in a second of its own: the server limits a team to
      // API_RATE_LIMIT=10 requests a second, and blocks run back to back.
      await new Promise((r) => setTimeout(r, 1000 - (Date.now() % 1000)));
      const { stdout: out } = await run('sh', ['-ec', local(b.code)], {
        env: { ...process.env, KEY: apiKey }, timeout: 30_000 });
      if (/^curl -s \S+\/api\/v1\/domains -H/m.test(b.code) && /Domain example\.com is already registered/.test(out)) {
        return; // the curl way to add the domain the js block before it added: the same domain
      }
      assert.doesNotMatch(out, /"error"|"code":"(BAD_REQUEST|NOT_FOUND|FORBIDDEN|INTERNAL)/, `block ${i + 1} printed:\n${out}`);
      assert.ok(out.trim() !== '', `block ${i + 1} printed nothing`);
    });
  });
});
