// Streamed answers of POST /v1/translate: which form the client asked for (Accept), and a stream that writes one JSON
// object per line (NDJSON) or per server-sent event.
import { PassThrough } from 'node:stream';
import type { FastifyReply } from 'fastify';

export type StreamKind = 'ndjson' | 'sse';

/** How the client wants the answer: NDJSON lines, server-sent events, or (undefined) one JSON body. */
export function streamKind(accept: string | undefined): StreamKind | undefined {
  if (!accept) return undefined;
  if (/application\/x-ndjson/i.test(accept)) return 'ndjson';
  if (/text\/event-stream/i.test(accept)) return 'sse';
  return undefined;
}

/** Sets the reply's headers and returns the stream to send and its writer. */
export function answerStream(reply: FastifyReply, kind: StreamKind): { out: PassThrough; write(obj: object): void } {
  const out = new PassThrough();
  reply
    .header('content-type', kind === 'sse' ? 'text/event-stream' : 'application/x-ndjson')
    .header('cache-control', 'no-cache');
  return {
    out,
    write: (obj) => out.write(kind === 'sse' ? `data: ${JSON.stringify(obj)}\n\n` : `${JSON.stringify(obj)}\n`),
  };
}
