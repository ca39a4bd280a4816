#!/usr/bin/env node
// Mints an HS256 bearer token for local development.
//
//   node scripts/mint-token.mjs [--sub alice] [--tenant acme] [--ttl 3600]
//
// Reads MCP_JWT_HS256_SECRET, MCP_JWT_ISSUER and MCP_RESOURCE_URL from the
// environment, falling back to .dev.vars (the local-only settings `make dev`
// writes). Prints the token on stdout. Never use these secrets in production.
import { createHmac } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";

const args = process.argv.slice(2);
const opt = (name, fallback) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 && i + 1 < args.length ? args[i + 1] : fallback;
};

const vars = {};
if (existsSync(".dev.vars")) {
  for (const line of readFileSync(".dev.vars", "utf8").split("\n")) {
    const m = line.match(/^\s*([A-Z0-9_]+)\s*=\s*"?(.*?)"?\s*$/);
    if (m) vars[m[1]] = m[2];
  }
}
const setting = (name) => process.env[name] ?? vars[name];
const secret = setting("MCP_JWT_HS256_SECRET");
const issuer = setting("MCP_JWT_ISSUER");
const audience = setting("MCP_RESOURCE_URL");
if (!secret || !issuer || !audience) {
  console.error("mint-token: MCP_JWT_HS256_SECRET, MCP_JWT_ISSUER and MCP_RESOURCE_URL must be set (or in .dev.vars; run `make dev` once).");
  process.exit(2);
}

const now = Math.floor(Date.now() / 1000);
const ttl = Number(opt("ttl", "3600"));
const claims = {
  iss: issuer,
  aud: audience,
  sub: opt("sub", "developer"),
  tenant: opt("tenant", "local"),
  iat: now,
  exp: now + ttl,
};
const b64 = (x) => Buffer.from(typeof x === "string" ? x : JSON.stringify(x)).toString("base64url");
const input = `${b64({ alg: "HS256", typ: "JWT" })}.${b64(claims)}`;
const sig = createHmac("sha256", secret).update(input).digest("base64url");
process.stdout.write(`${input}.${sig}\n`);
