// A job API on 127.0.0.1 for the run_job tests (the same API as
// tests/wasi/upstream.rs): `POST /api/jobs` (the same idempotency key, the
// same job) and `GET /api/jobs/{id}`. A test scripts how the next submits
// answer (a status code, or a hang after the request was received) and
// reads what the API saw.

import http from 'node:http';

export class Upstream {
  constructor() {
    this.submits = []; // { status } | { hangMs } | { redirect: true }
    this.health = []; // statuses of the next GET /health (then 200)
    this.polls = 0;
    this.jobs = new Map(); // key -> { id, left }
    this.seen = [];
  }

  async start() {
    this.server = http.createServer((req, res) => this.answer(req, res));
    await new Promise((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.port = this.server.address().port;
    this.origin = `http://127.0.0.1:${this.port}`;
    this.url = `${this.origin}/api`;
    return this;
  }

  async stop() {
    this.server.closeAllConnections?.();
    await new Promise((resolve) => this.server.close(resolve));
  }

  submitKeys() {
    return this.seen.filter((s) => s.method === 'POST').map((s) => s.key);
  }

  answer(req, res) {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', async () => {
      const key = req.headers['idempotency-key'] ?? null;
      this.seen.push({
        method: req.method, path: req.url, key, authorization: req.headers.authorization ?? null,
        probe: req.headers['x-probe'] ?? null, body: Buffer.concat(chunks).toString('utf8'),
      });
      const send = (status, body, headers = {}) => {
        res.writeHead(status, { 'content-type': 'application/json', ...headers });
        res.end(JSON.stringify(body));
      };
      // No body at all (a 204): an answer, not a failure, to the step.
      if (req.url === '/empty') {
        res.writeHead(204);
        return res.end();
      }
      const scripted = req.method === 'POST' ? this.submits.shift() : undefined;
      // A 307 to the same path at another origin (localhost, the same
      // API), which an allow-list naming 127.0.0.1 does not name.
      if (scripted?.redirect) {
        res.writeHead(307, { location: `http://localhost:${this.port}${req.url}` });
        return res.end();
      }
      if (scripted?.status) {
        return send(scripted.status, { error: 'scripted' }, scripted.status === 429 ? { 'retry-after': '1' } : {});
      }
      if (scripted?.hangMs) await new Promise((r) => setTimeout(r, scripted.hangMs));
      if (req.method === 'GET' && req.url === '/health') {
        const status = this.health.shift() ?? 200;
        return send(status, { healthy: status === 200 });
      }
      if (req.method === 'POST' && req.url === '/api/jobs') {
        if (!this.jobs.has(key)) this.jobs.set(key, { id: `job-${this.jobs.size + 1}`, left: this.polls });
        return send(202, { id: this.jobs.get(key).id });
      }
      const m = req.method === 'GET' && req.url.match(/^\/api\/jobs\/([^/]+)$/);
      if (m) {
        const job = [...this.jobs.values()].find((j) => j.id === m[1]);
        if (!job) return send(404, { error: 'no such job' });
        if (job.left > 0) {
          job.left -= 1;
          return send(200, { status: 'running' });
        }
        return send(200, { status: 'succeeded', result: { rows: 3 } });
      }
      return send(404, { error: 'not found' });
    });
  }
}
