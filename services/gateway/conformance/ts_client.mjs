// `make conformance`: the official TypeScript SDK's current client (@modelcontextprotocol/client, v2) against two
// gateway replicas behind a round-robin balancer (each HTTP request goes to the other replica). In 'auto' mode it
// must take the stateless 2026-07-28 form, in 'legacy' mode the initialize handshake; in each, a call of every built
// dialect (`?profile=all`), and the replicas' per-version metric must have counted exactly those calls at the
// expected version.
//
// node ts_client.mjs <node_modules holding the client> <first MCP URL> <second MCP URL> <access key>
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const [modules, first, second, key] = process.argv.slice(2);
const sdk = pathToFileURL(join(modules, '@modelcontextprotocol/client/dist/index.mjs')).href;
const { Client, StreamableHTTPClientTransport } = await import(sdk);

const replicas = [new URL(first), new URL(second)];
const sent = [0, 0];
let turn = 0;

function roundRobin(input, init) {
  const replica = turn++ % replicas.length;
  sent[replica] += 1;
  const url = new URL(input instanceof Request ? input.url : String(input));
  url.host = replicas[replica].host;
  return input instanceof Request ? fetch(new Request(url, input), init) : fetch(url, init);
}

function check(ok, what) {
  if (!ok) {
    console.error(`ts client: FAILED: ${what}`);
    process.exit(1);
  }
}

async function toolCallsServed(version) {
  let total = 0;
  for (const replica of replicas) {
    const text = await (await fetch(new URL('/metrics', replica))).text();
    for (const line of text.split('\n')) {
      const ours = line.startsWith('memento_mcp_messages_total{') && line.includes('method="tools/call"');
      if (ours && line.includes(`version="${version}"`)) total += Number(line.split(' ').pop());
    }
  }
  return total;
}

async function call(client, name, args) {
  const result = await client.callTool({ name, arguments: args });
  check(!result.isError, `${name}: ${JSON.stringify(result.content)}`);
  return result.structuredContent;
}

async function everyDialect(client, mode) {
  const topic = `ts-${mode}`;
  const stored = await call(client, 'remember', { content: `stored in ${mode} mode`, topic, type: 'fact' });
  const found = await call(client, 'recall', { topic });
  check(found.fragments.map((f) => f.id).join() === stored.id, `${mode}: recall found ${JSON.stringify(found)}`);
  const simple = await call(client, 'store_memory', { content: `The TypeScript client ran in ${mode} mode` });
  check(simple.created?.id, `${mode}: store_memory: ${JSON.stringify(simple)}`);
  const remembered = await call(client, 'memento_remember', { content: 'aurora is visible tonight', tags: ['aurora'] });
  check(remembered.id, `${mode}: memento_remember: ${JSON.stringify(remembered)}`);
  const turn = await call(client, 'memory_before_turn', { session_id: topic, current_input_text: 'hello' });
  check(turn.turn_id, `${mode}: memory_before_turn: ${JSON.stringify(turn)}`);
  const markdown = '# App\n\n## Auth\n\nTokens refresh every hour.\n';
  const document = { canonicalKey: 'app', docClass: 'app_spec', title: 'App', contentMarkdown: markdown };
  await call(client, 'canonical.upsert', { ...document, idempotencyKey: crypto.randomUUID() });
  const read = await call(client, 'canonical.get', { canonicalKey: 'app' });
  check(read.contentMarkdown === markdown, `${mode}: canonical.get: ${JSON.stringify(read)}`);
  return 7;
}

async function roundTrip(mode, expected) {
  const before = await toolCallsServed(expected);
  const headers = { Authorization: `Bearer ${key}`, 'X-Memento-Workspace': `ts-${mode}-${Date.now()}` };
  const url = new URL('?profile=all', replicas[0]);
  const transport = new StreamableHTTPClientTransport(url, { fetch: roundRobin, requestInit: { headers } });
  const client = new Client({ name: 'memento-conformance', version: '1.0.0' }, { versionNegotiation: { mode } });
  await client.connect(transport);
  const version = client.getNegotiatedProtocolVersion();
  check(version === expected, `${mode} mode negotiated ${version}, expected ${expected}`);
  const made = await everyDialect(client, mode);
  await client.close();
  const counted = (await toolCallsServed(expected)) - before;
  check(counted === made, `${mode}: the gateways counted ${counted} tool calls at ${expected}, expected ${made}`);
  console.log(`ts client: ${mode} mode spoke ${expected} (requests per replica so far: ${sent.join(', ')})`);
}

await roundTrip('auto', '2026-07-28');
await roundTrip('legacy', '2025-11-25');
check(sent.every((n) => n > 0), 'the requests did not reach both replicas');
