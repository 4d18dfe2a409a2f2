// startServer builds cmd/mailroom and starts it on a free loopback port with a temporary data
// directory and the given bootstrap key, for the tests that drive it from outside (the README's
// snippets, the older SDK). sdk.test.mjs keeps its own start, which also checks the start line.
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

export const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');

// startServer resolves to {baseURL, workDir, stop}; stop() ends the server (SIGTERM) and
// removes its folder.
export async function startServer(name, apiKey, env = {}) {
  const workDir = await mkdtemp(join(tmpdir(), `mailroom-${name}-`));
  const bin = join(workDir, 'mailroom');
  await promisify(execFile)(process.env.GO || 'go', ['build', '-o', bin, './cmd/mailroom'], { cwd: repoRoot });
  const proc = spawn(bin, [], {
    cwd: workDir,
    env: { ...process.env, BACKEND: 'embedded', HOST: '127.0.0.1', PORT: '0', DATA_DIR: join(workDir, 'data'),
      BOOTSTRAP_API_KEY: apiKey, LOG_LEVEL: 'warn', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const exited = once(proc, 'exit');
  let stderr = '';
  proc.stderr.setEncoding('utf8');
  proc.stderr.on('data', (c) => { stderr += c; });
  const lines = createInterface({ input: proc.stdout });
  // stop ends the server and removes its folder, whatever happens below.
  const stop = async () => {
    if (proc.exitCode === null && proc.signalCode === null) {
      proc.kill('SIGTERM');
      await exited;
    }
    await rm(workDir, { recursive: true, force: true });
  };
  let first;
  try {
    first = await new Promise((ok, fail) => {
      lines.once('line', ok);
      exited.then(() => fail(new Error(`server exited before its start line:\n${stderr}`)));
    });
  } catch (err) {
    await stop();
    throw err;
  }
  lines.on('line', () => {}); // keep draining
  const baseURL = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(first)?.[1];
  if (!baseURL) {
    await stop();
    assert.fail(`unexpected start line ${first}`);
  }
  for (let i = 0; i < 200; i++) {
    try {
      if ((await fetch(`${baseURL}/healthz`)).ok) return { baseURL, workDir, stop };
    } catch { /* not yet */ }
    await new Promise((r) => setTimeout(r, 25));
  }
  await stop();
  assert.fail('the server never answered /healthz');
}
