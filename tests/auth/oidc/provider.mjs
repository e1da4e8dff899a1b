// A real OpenID Provider for the tests: the certified `oidc-provider` package (installed by
// .ci/run in .tools/oidc), on 127.0.0.1, with its own development login and consent pages.
//
//   node provider.mjs [PORT]      (or OIDC_TEST_PORT; 0 or nothing: any free port)
//
// OIDC_TEST_CONFIG is a JSON object:
//   clients   [{client_id, client_secret, redirect_uris, ...}]: client metadata; defaults are
//             token_endpoint_auth_method client_secret_basic, grant_types [authorization_code],
//             response_types [code]
//   accounts  {login: {sub, email, email_verified, name}}: the login name typed into the login
//             page (any password) signs in the account whose ID token `sub` is `sub` (the login
//             name if none); any other login name gets the login page again
//   pkce_required  (default true): every client, confidential ones too, must send a S256
//             code_challenge
//   id_token_ttl   seconds an ID token is valid (default: the package's, one hour)
//   issuer    the issuer to claim instead of http://127.0.0.1:<port>, "{port}" replaced by the
//             port: discovery, the authorization response's `iss` and every token then say it
//             (e.g. "http://localhost:{port}"), while the server still listens on 127.0.0.1
//
// The package is loaded from .tools/oidc/node_modules, or from OIDC_PROVIDER_MODULES.
// Prints `READY <issuer>` on stdout once listening (`READY <issuer> <url>` where the issuer is
// not the URL it listens on); exits 0 on SIGTERM or SIGINT.

import { createServer } from 'node:http';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';
import * as querystring from 'node:querystring';

const here = fileURLToPath(new URL('.', import.meta.url));
const modules = process.env.OIDC_PROVIDER_MODULES ?? `${here}../../../.tools/oidc/node_modules/`;
const entry = createRequire(modules.endsWith('/') ? modules : `${modules}/`).resolve('oidc-provider');
const { default: Provider } = await import(pathToFileURL(entry).href);

const config = JSON.parse(process.env.OIDC_TEST_CONFIG ?? '{}');
const accounts = config.accounts ?? {};
const bySub = new Map(Object.entries(accounts).map(([login, claims]) => [claims.sub ?? login, claims]));
const subOfLogin = (login) => accounts[login]?.sub ?? login;

const clients = (config.clients ?? []).map((client) => ({
  token_endpoint_auth_method: 'client_secret_basic',
  grant_types: ['authorization_code'],
  response_types: ['code'],
  ...client,
}));

const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
const signingKey = { ...privateKey.export({ format: 'jwk' }), kid: 'test-rs256', alg: 'RS256', use: 'sig' };

// The server first: the issuer names its port.
let handle = (req, res) => { res.statusCode = 503; res.end(); };
const server = createServer((req, res) => handle(req, res));
const port = Number(process.argv[2] ?? process.env.OIDC_TEST_PORT ?? 0);
await new Promise((resolve, reject) => {
  server.once('error', reject);
  server.listen(port, '127.0.0.1', resolve);
});
const actual = server.address().port;
const url = `http://127.0.0.1:${actual}`;
const issuer = (config.issuer ?? url).replaceAll('{port}', String(actual));

const configuration = {
  clients,
  jwks: { keys: [signingKey] },
  cookies: { keys: [randomBytes(32).toString('base64url')] },
  claims: {
    openid: ['sub'],
    email: ['email', 'email_verified'],
    profile: ['name'],
  },
  // Scope claims in the ID token too (the package otherwise keeps them for userinfo).
  conformIdTokenClaims: false,
  features: { devInteractions: { enabled: true } },
  pkce: { required: () => config.pkce_required ?? true },
  async findAccount(ctx, sub) {
    const claims = bySub.get(sub);
    if (!claims) return undefined;
    return {
      accountId: sub,
      async claims() {
        return { ...claims, sub };
      },
    };
  },
};
if (config.id_token_ttl !== undefined) {
  configuration.ttl = { IdToken: config.id_token_ttl };
}

const provider = new Provider(issuer, configuration);

// The development login page posts the login name as the account id, and the ID token's `sub`
// is that id: here the login name becomes the account's `sub` before the page's own handler
// reads the form (it takes an already parsed body, with a one-time notice on stderr); a login
// that is no account's gets the login page again.
provider.use(async (ctx, next) => {
  if (ctx.method === 'POST' && /^\/interaction\/[^/]+$/.test(ctx.path)
      && ctx.is('application/x-www-form-urlencoded')) {
    const chunks = [];
    for await (const chunk of ctx.req) chunks.push(chunk);
    const body = querystring.parse(Buffer.concat(chunks).toString());
    if (body.prompt === 'login') {
      if (typeof body.login !== 'string' || !Object.hasOwn(accounts, body.login)) {
        // Not an account: the login page again, as for a wrong password.
        ctx.status = 303;
        ctx.redirect(ctx.path);
        return;
      }
      body.login = subOfLogin(body.login);
    }
    ctx.request.body = body;
  }
  await next();
});

handle = provider.callback();
process.stdout.write(issuer === url ? `READY ${issuer}\n` : `READY ${issuer} ${url}\n`);

const stop = () => {
  server.close(() => process.exit(0));
  server.closeAllConnections();
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
