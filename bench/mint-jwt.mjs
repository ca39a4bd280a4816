#!/usr/bin/env node
// The bearer token of the benchmark's authenticated server (`ours-wasi-jwt`
// in bench/run.sh): a fresh Ed25519 key pair, its public key as a JWKS and
// a token signed with it, valid for a day.
//
//   node bench/mint-jwt.mjs <resource URL> <issuer> <out dir>
//
// Writes <out dir>/jwks.json and <out dir>/token.
import { generateKeyPairSync, sign } from "node:crypto";
import { mkdirSync, writeFileSync } from "node:fs";

const [resource, issuer, out] = process.argv.slice(2);
if (!resource || !issuer || !out) {
  console.error("usage: node bench/mint-jwt.mjs <resource URL> <issuer> <out dir>");
  process.exit(2);
}
const { publicKey, privateKey } = generateKeyPairSync("ed25519");
const jwk = { ...publicKey.export({ format: "jwk" }), kid: "bench", alg: "EdDSA", use: "sig" };
const now = Math.floor(Date.now() / 1000);
const b64 = (x) => Buffer.from(JSON.stringify(x)).toString("base64url");
const input = `${b64({ alg: "EdDSA", typ: "JWT", kid: "bench" })}.${b64({
  iss: issuer, aud: resource, sub: "bench", tenant: "bench", iat: now, exp: now + 86_400,
})}`;
const signature = sign(null, Buffer.from(input), privateKey).toString("base64url");
mkdirSync(out, { recursive: true });
writeFileSync(`${out}/jwks.json`, JSON.stringify({ keys: [jwk] }));
writeFileSync(`${out}/token`, `${input}.${signature}`);
