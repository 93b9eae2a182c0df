// A real OAuth 2.1 authorization server on loopback for Engram's tests: oidc-provider (pinned in
// package.json / package-lock.json), configured from the environment so any test can use it.
//
//   OAUTH_PORT        port to listen on (0: a free one; the first stdout line says which)
//   OAUTH_RESOURCES   JSON list of {resource, scope, ttl}: the protected resources (RFC 8707)
//                     and their access tokens (JWT, audience = resource, ttl seconds)
//   OAUTH_CLIENTS     JSON list of pre-registered clients (oidc-provider client metadata)
//   OAUTH_ACCOUNT     the account every interaction signs in as (default "user-1"); a
//                     `login_hint` on the authorization request overrides it
//   OAUTH_CIMD        "1": advertise and accept Client ID Metadata Documents (https client ids)
//   OAUTH_REGISTRATION "0": no dynamic client registration (RFC 7591)
//
// Interactions (sign-in, consent) complete by themselves: a browser, or a test's HTTP client that
// keeps cookies and follows redirects, reaches the client's redirect_uri with a code. Supported:
// dynamic registration (RFC 7591), PKCE S256, resource indicators, refresh tokens, revocation
// (RFC 7009), RFC 8414 and OIDC discovery. `GET /_events` lists what happened (grant,
// refresh, revocation), for tests that must see the server's side.
import http from 'node:http';

import Provider from 'oidc-provider';

const port = Number(process.env.OAUTH_PORT || 0);
const resources = JSON.parse(process.env.OAUTH_RESOURCES || '[]');
const clients = JSON.parse(process.env.OAUTH_CLIENTS || '[]');
const account = process.env.OAUTH_ACCOUNT || 'user-1';
const events = [];

function record(kind, detail) {
  events.push({ kind, at: Date.now() / 1000, ...detail });
}

function resourceOf(indicator) {
  return resources.find((r) => r.resource === indicator);
}

async function main() {
  const server = http.createServer();
  await new Promise((done) => { server.listen(port, '127.0.0.1', done); });
  const issuer = `http://127.0.0.1:${server.address().port}`;
  const provider = new Provider(issuer, {
    clients,
    clientDefaults: { grant_types: ['authorization_code', 'refresh_token'], response_types: ['code'] },
    scopes: ['openid', 'offline_access', ...new Set(resources.flatMap((r) => (r.scope || '').split(' ').filter(Boolean)))],
    pkce: { required: () => true },
    findAccount: async (_ctx, sub) => ({ accountId: sub, claims: async () => ({ sub }) }),
    issueRefreshToken: async (_ctx, client) => client.grantTypeAllowed('refresh_token'),
    ttl: {
      AccessToken: (_ctx, token) => (resourceOf(token.aud)?.ttl ?? 600),
      RefreshToken: 86400,
      Grant: 86400,
      Session: 86400,
      Interaction: 600,
      AuthorizationCode: 60,
    },
    features: {
      devInteractions: { enabled: false },
      registration: { enabled: process.env.OAUTH_REGISTRATION !== '0' },
      revocation: { enabled: true },
      clientIdMetadataDocument: process.env.OAUTH_CIMD === '1'
        ? { enabled: true, ack: 'draft-02' } : { enabled: false },
      resourceIndicators: {
        enabled: true,
        defaultResource: async (_ctx, _client, oneOf) => oneOf,
        useGrantedResource: async () => true,
        getResourceServerInfo: async (_ctx, indicator) => {
          const found = resourceOf(indicator);
          if (!found) throw new Provider.errors.InvalidTarget(`unknown resource ${indicator}`);
          return {
            scope: found.scope || '',
            audience: found.resource,
            accessTokenTTL: found.ttl ?? 600,
            accessTokenFormat: 'jwt',
            jwt: { sign: { alg: 'RS256' } },
          };
        },
      },
    },
    // Interactions finish by themselves: sign in as the hinted or configured account, grant
    // what the client asked for (its scopes and resources).
    interactions: { url: (_ctx, interaction) => `/interaction/${interaction.uid}` },
  });
  provider.proxy = false;

  provider.on('grant.success', (ctx) => record('grant', { client: ctx.oidc.client?.clientId }));
  provider.on('grant.error', (_ctx, err) => record('grant_error', { error: err.message, detail: err.error_description }));
  provider.on('grant.revoked', (ctx, grantId) => record('revocation', { client: ctx.oidc.client?.clientId, grant: grantId }));
  provider.on('revocation.error', (_ctx, err) => record('revocation_error', { error: err.message }));
  provider.on('refresh_token.consumed', (token) => record('refresh', { client: token.clientId }));
  provider.on('registration_create.success', (_ctx, client) => record('registration', { client: client.clientId }));
  provider.on('authorization.error', (_ctx, err) => record('authorization_error', { error: err.message, detail: err.error_description }));
  provider.on('server_error', (_ctx, err) => record('server_error', { error: String(err) }));

  const callback = provider.callback();
  server.on('request', async (req, res) => {
    try {
      if (req.url === '/_events') {
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify(events));
        return;
      }
      const match = req.url.match(/^\/interaction\/([\w-]+)$/);
      if (match && req.method === 'GET') {
        const details = await provider.interactionDetails(req, res);
        const { prompt, params } = details;
        if (prompt.name === 'login') {
          const accountId = params.login_hint || account;
          await provider.interactionFinished(req, res, { login: { accountId } }, { mergeWithLastSubmission: false });
          return;
        }
        const grant = details.grantId
          ? await provider.Grant.find(details.grantId)
          : new provider.Grant({ accountId: details.session.accountId, clientId: params.client_id });
        if (prompt.details.missingOIDCScope) grant.addOIDCScope(prompt.details.missingOIDCScope.join(' '));
        if (prompt.details.missingResourceScopes) {
          for (const [indicator, scopes] of Object.entries(prompt.details.missingResourceScopes)) {
            grant.addResourceScope(indicator, scopes.join(' '));
          }
        }
        const grantId = await grant.save();
        await provider.interactionFinished(req, res, { consent: { grantId } }, { mergeWithLastSubmission: true });
        return;
      }
      callback(req, res);
    } catch (err) {
      record('fixture_error', { error: String(err) });
      res.statusCode = 500;
      res.end(String(err));
    }
  });
  process.stdout.write(`${JSON.stringify({ issuer, port: server.address().port })}\n`);
}

main().catch((err) => {
  process.stderr.write(`${err.stack}\n`);
  process.exit(1);
});
