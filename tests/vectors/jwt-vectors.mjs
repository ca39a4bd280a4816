// Writes tests/vectors/jwt.json: JWS test vectors that every signature
// verifier must agree on (RustCrypto in the core tests, the Worker's
// WebCrypto in the workerd e2e). Fresh keys each run; only public keys are
// written. Run: node tests/vectors/jwt-vectors.mjs > tests/vectors/jwt.json
import crypto from 'node:crypto';

const b64u = (b) => Buffer.from(b).toString('base64url');
const NOW = 1_800_000_000_000;
const ISSUER = 'https://issuer.test';
const RESOURCE = 'https://mcp.example/mcp';
const hsSecret = crypto.randomBytes(32);
const otherSecret = crypto.randomBytes(32);
const ed = crypto.generateKeyPairSync('ed25519');
const edOther = crypto.generateKeyPairSync('ed25519');
const ec = crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' });
const ecOther = crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' });
const jwk = (k, kid) => ({ ...k.publicKey.export({ format: 'jwk' }), kid });
// The P-256 group order and the Ed25519 group order (little-endian S).
const N = BigInt('0xffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551');
const L = (1n << 252n) + 27742317777372353535851937790883648493n;

const claims = {
  iss: ISSUER, aud: RESOURCE, sub: 'alice', tenant: 'acme',
  iat: NOW / 1000 - 60, exp: NOW / 1000 + 600,
};
const input = (header, body = claims) => `${b64u(JSON.stringify(header))}.${b64u(JSON.stringify(body))}`;
const hs = (secret, i) => crypto.createHmac('sha256', secret).update(i).digest();
const eds = (key, i) => crypto.sign(null, Buffer.from(i), key.privateKey);
const es = (key, i, dsaEncoding = 'ieee-p1363') => crypto.sign('sha256', Buffer.from(i), { key: key.privateKey, dsaEncoding });
const token = (i, sig) => `${i}.${b64u(sig)}`;
const tamper = (t) => {
  const [h, p, s] = t.split('.');
  return [h, b64u(JSON.stringify({ ...claims, sub: 'mallory' })), s].join('.');
};
const be32 = (n) => Buffer.from(n.toString(16).padStart(64, '0'), 'hex');
const le32 = (n) => be32(n).reverse();
const fromLe = (b) => BigInt(`0x${Buffer.from(b).reverse().toString('hex')}`);

const HS = { alg: 'HS256', typ: 'JWT' };
const ED = { alg: 'EdDSA', kid: 'ed-1' };
const ES = { alg: 'ES256', kid: 'p256-1' };
const ok = { tenant: 'acme', principal: 'alice' };
const refused = (why) => ({ refused: why });

const cases = [];
const add = (name, t, expect) => cases.push({ name, token: t, expect });

const hsGood = token(input(HS), hs(hsSecret, input(HS)));
add('HS256 valid', hsGood, ok);
add('HS256 signed with another secret', token(input(HS), hs(otherSecret, input(HS))), refused('bad signature'));
add('HS256 payload changed after signing', tamper(hsGood), refused('bad signature'));
add('HS256 signature truncated', token(input(HS), hs(hsSecret, input(HS)).subarray(0, 31)), refused('bad signature'));
add('HS256 signature empty', `${input(HS)}.`, refused('bad signature'));
add('HS256 signature with a byte appended', token(input(HS), Buffer.concat([hs(hsSecret, input(HS)), Buffer.from([0])])), refused('bad signature'));
// The classic confusion: an HMAC keyed with a published public key.
add('HS256 keyed with the Ed25519 public key', token(input(HS), hs(Buffer.from(ed.publicKey.export({ format: 'jwk' }).x, 'base64url'), input(HS))), refused('bad signature'));

const edGood = token(input(ED), eds(ed, input(ED)));
add('EdDSA valid', edGood, ok);
add('EdDSA payload changed after signing', tamper(edGood), refused('bad signature'));
add('EdDSA signed by another key under the same kid', token(input(ED), eds(edOther, input(ED))), refused('bad signature'));
add('EdDSA signature truncated', token(input(ED), eds(ed, input(ED)).subarray(0, 63)), refused('bad signature'));
{
  // S + L: the same signature with a non-canonical scalar (malleated).
  const sig = Buffer.from(eds(ed, input(ED)));
  const s = fromLe(sig.subarray(32)) + L;
  if (s < 1n << 256n) sig.set(le32(s), 32);
  add('EdDSA signature with a non-canonical S (S + L)', token(input(ED), sig), refused('bad signature'));
}
add('EdDSA signature of zeros', token(input(ED), Buffer.alloc(64)), refused('bad signature'));

const esGood = token(input(ES), es(ec, input(ES)));
add('ES256 valid', esGood, ok);
add('ES256 payload changed after signing', tamper(esGood), refused('bad signature'));
add('ES256 signed by another key under the same kid', token(input(ES), es(ecOther, input(ES))), refused('bad signature'));
add('ES256 signature in DER instead of r || s', token(input(ES), es(ec, input(ES), 'der')), refused('bad signature'));
{
  // (r, n - s) verifies in textbook ECDSA; JWS (RFC 7518) does not require
  // low S, and both verifiers accept it.
  const sig = Buffer.from(es(ec, input(ES)));
  const s = BigInt(`0x${sig.subarray(32).toString('hex')}`);
  sig.set(be32(N - s), 32);
  add('ES256 signature with the high S (r, n - s)', token(input(ES), sig), ok);
}
add('ES256 signature of zeros', token(input(ES), Buffer.alloc(64)), refused('bad signature'));
{
  // r and s equal to the group order: out of range.
  add('ES256 signature with r = s = n', token(input(ES), Buffer.concat([be32(N), be32(N)])), refused('bad signature'));
}
add('ES256 header naming the EdDSA key', token(input({ alg: 'ES256', kid: 'ed-1' }), es(ec, input({ alg: 'ES256', kid: 'ed-1' }))), refused('unknown key id'));
add('EdDSA header naming the P-256 key', token(input({ alg: 'EdDSA', kid: 'p256-1' }), eds(ed, input({ alg: 'EdDSA', kid: 'p256-1' }))), refused('unknown key id'));
add('alg none', `${input({ alg: 'none' })}.`, refused('unsigned token'));

process.stdout.write(`${JSON.stringify({
  about: 'JWS vectors every signature verifier must agree on; written by tests/vectors/jwt-vectors.mjs',
  now: NOW,
  issuer: ISSUER,
  resource: RESOURCE,
  hs256Secret: b64u(hsSecret),
  jwks: { keys: [jwk(ed, 'ed-1'), jwk(ec, 'p256-1')] },
  cases,
}, null, 1)}\n`);
