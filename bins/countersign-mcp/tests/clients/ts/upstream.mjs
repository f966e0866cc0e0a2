// A two-tool MCP server written with the TypeScript SDK, the upstream of the proxy rows of the
// client matrix: `read_notes` (read-only) returns the notes file, `append_note` appends its
// arguments to it as one JSON line, so the test can count the runs and read the bytes each got.
// The file is $UPSTREAM_NOTES. `append_note` declares an outputSchema ({"result": string}), as
// many servers do, so a client that validates structured content checks the gate's answers
// against it.
import { appendFileSync, readFileSync } from 'node:fs';
import { load } from './sdk.mjs';

const { McpServer } = load('@modelcontextprotocol/sdk/server/mcp.js');
const { StdioServerTransport } = load('@modelcontextprotocol/sdk/server/stdio.js');
const { z } = load('zod');

const notes = process.env.UPSTREAM_NOTES;
if (!notes) {
    throw new Error('UPSTREAM_NOTES is not set');
}

const server = new McpServer({ name: 'notes', version: '1' });

server.registerTool(
    'read_notes',
    { description: 'Returns every note so far.', annotations: { readOnlyHint: true } },
    async () => {
        let text = '';
        try {
            text = readFileSync(notes, 'utf8');
        } catch {
            // no note yet
        }
        return { content: [{ type: 'text', text }] };
    },
);

server.registerTool(
    'append_note',
    {
        description: 'Appends a note.',
        inputSchema: { text: z.string() },
        outputSchema: { result: z.string() },
        annotations: { readOnlyHint: false },
    },
    async (args) => {
        appendFileSync(notes, JSON.stringify(args) + '\n');
        return {
            content: [{ type: 'text', text: 'appended' }],
            structuredContent: { result: 'appended' },
        };
    },
);

await server.connect(new StdioServerTransport());
