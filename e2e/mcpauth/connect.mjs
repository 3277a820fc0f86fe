// Connects the official MCP TypeScript SDK client to an assent server with
// only its MCP URL (argv[2]): it discovers the authorization server,
// registers, prints the authorization URL for the person as a JSON line
// {"authorize": URL}, reads the authorization code from standard input,
// gets a token and prints {"tools": [names], "refreshed": bool}.
import { createInterface } from "node:readline";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { UnauthorizedError } from "@modelcontextprotocol/sdk/client/auth.js";

const url = new URL(process.argv[2]);
const redirect = "http://127.0.0.1:7777/callback";
const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();

const state = {};
const provider = {
  get redirectUrl() { return redirect; },
  get clientMetadata() {
    return { client_name: "TypeScript SDK client", redirect_uris: [redirect], grant_types: ["authorization_code", "refresh_token"], response_types: ["code"], token_endpoint_auth_method: "none" };
  },
  clientInformation() { return state.client; },
  saveClientInformation(c) { state.client = c; },
  tokens() { return state.tokens; },
  saveTokens(t) { state.tokens = t; },
  redirectToAuthorization(u) { console.log(JSON.stringify({ authorize: u.toString() })); },
  saveCodeVerifier(v) { state.verifier = v; },
  codeVerifier() { return state.verifier; },
};

async function connect() {
  const client = new Client({ name: "ts-host", version: "1" });
  await client.connect(new StreamableHTTPClientTransport(url, { authProvider: provider }));
  return client;
}

let client;
try {
  client = await connect();
} catch (e) {
  if (!(e instanceof UnauthorizedError)) throw e;
  const { value: code } = await lines.next();
  const t = new StreamableHTTPClientTransport(url, { authProvider: provider });
  await t.finishAuth(code.trim());
  client = await connect();
}
const { tools } = await client.listTools();
console.log(JSON.stringify({ tools: tools.map((t) => t.name), token_prefix: state.tokens.access_token.slice(0, 5), refresh: Boolean(state.tokens.refresh_token) }));
await client.close();
process.exit(0);
