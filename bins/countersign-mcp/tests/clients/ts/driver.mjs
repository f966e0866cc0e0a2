// One MCP connection of the TypeScript SDK (@modelcontextprotocol/sdk), driven line by line by
// the client matrix test.
//
//     node driver.mjs [--elicit] -- CMD ARGS...          a server over stdio
//     node driver.mjs [--elicit] --url URL --bearer TOK  streamable HTTP
//
// The SDK has one protocol generation: it sends `initialize` with its latest revision. With
// `--elicit` the client declares form elicitation and answers each question as the current
// `call` command says.
//
// The first line on stdout is {"ready": true, "protocol": VERSION} (or {"error": ...}). Then each
// JSON command read from stdin gets one JSON line back:
//
//     {"op": "list"}                                   -> {"tools": [...]}
//     {"op": "call", "tool": T, "args": {...},
//      "answer": "accept"|"decline"|"cancel"}          -> {"result": {...}, "asked": [...]}
//
// A call the SDK itself refuses (it validates structured content against the tool's
// outputSchema, for one) answers {"error": "..."}: the test reports it with the SDK's words.
import { createInterface } from 'node:readline';
import { load } from './sdk.mjs';

const { Client } = load('@modelcontextprotocol/sdk/client/index.js');
const { StdioClientTransport } = load('@modelcontextprotocol/sdk/client/stdio.js');
const { StreamableHTTPClientTransport } = load('@modelcontextprotocol/sdk/client/streamableHttp.js');
const { ElicitRequestSchema } = load('@modelcontextprotocol/sdk/types.js');

function say(value) {
    process.stdout.write(JSON.stringify(value) + '\n');
}

function parse(argv) {
    const elicit = argv.includes('--elicit');
    const rest = argv.filter((a) => a !== '--elicit');
    if (rest[0] === '--') {
        return { elicit, command: rest[1], args: rest.slice(2) };
    }
    const at = (flag) => (rest.includes(flag) ? rest[rest.indexOf(flag) + 1] : undefined);
    return { elicit, url: at('--url'), bearer: at('--bearer') };
}

// The SDK keeps the negotiated revision to itself on stdio; this transport notes it on the way.
class Noting {
    constructor(inner) {
        this.inner = inner;
        this.protocol = undefined;
    }
    async start() {
        this.inner.onmessage = (message, extra) => {
            if (message.result && typeof message.result.protocolVersion === 'string') {
                this.protocol ??= message.result.protocolVersion;
            }
            this.onmessage?.(message, extra);
        };
        this.inner.onclose = () => this.onclose?.();
        this.inner.onerror = (error) => this.onerror?.(error);
        return this.inner.start();
    }
    send(message, options) {
        return this.inner.send(message, options);
    }
    close() {
        return this.inner.close();
    }
    get sessionId() {
        return this.inner.sessionId;
    }
    setProtocolVersion(version) {
        this.inner.setProtocolVersion?.(version);
    }
}

function transport(target) {
    if (target.command) {
        // The server inherits this process's environment: the test sets COUNTERSIGN_HOME there.
        return new StdioClientTransport({
            command: target.command,
            args: target.args,
            env: { ...process.env },
            stderr: 'inherit',
        });
    }
    const headers = target.bearer ? { Authorization: `Bearer ${target.bearer}` } : {};
    return new StreamableHTTPClientTransport(new URL(target.url), { requestInit: { headers } });
}

const target = parse(process.argv.slice(2));
const host = { answer: 'cancel', asked: [] };
const client = new Client(
    { name: 'countersign-matrix-ts', version: '1' },
    { capabilities: target.elicit ? { elicitation: { form: {} } } : {} },
);
if (target.elicit) {
    client.setRequestHandler(ElicitRequestSchema, async (request) => {
        host.asked.push(request.params.message);
        if (host.answer === 'accept') {
            return { action: 'accept', content: { approve: true } };
        }
        return { action: host.answer };
    });
}

const noting = new Noting(transport(target));
try {
    await client.connect(noting);
} catch (e) {
    say({ error: `connect: ${e}` });
    process.exit(1);
}
say({ ready: true, protocol: noting.protocol });

for await (const line of createInterface({ input: process.stdin })) {
    const command = JSON.parse(line);
    try {
        if (command.op === 'list') {
            const listed = await client.listTools();
            say({ tools: listed.tools });
        } else if (command.op === 'call') {
            host.answer = command.answer ?? 'cancel';
            host.asked = [];
            const result = await client.callTool(
                { name: command.tool, arguments: command.args ?? {} },
                undefined,
                { timeout: 120000 },
            );
            say({ result, asked: host.asked });
        } else {
            say({ error: `unknown op ${command.op}` });
        }
    } catch (e) {
        say({ error: String(e) });
    }
}
await client.close();
