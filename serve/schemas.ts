// JSON schemas of planc serve's routes (Fastify validates bodies with them; @fastify/swagger publishes them).

/** The per-request decoding options a client may set (each maps onto DecodingOptions in translate-route.ts). */
export const OPTIONS_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  properties: {
    beam: {
      type: 'integer',
      minimum: 1,
      maximum: 64,
      description: "beam size; 1 = greedy (default: the plan's num_beams, else 1)",
    },
    maxLength: {
      type: 'integer',
      minimum: 1,
      maximum: 65536,
      description: "cap on generated tokens per sentence (default: the plan's max_new_tokens, else 256)",
    },
    nBest: {
      type: 'integer',
      minimum: 1,
      maximum: 64,
      description:
        'return the N best translations of each sentence (implies scores; widens the beam to N when beam is not given)',
    },
    scores: { type: 'boolean', description: "return each translation's length-penalized log-probability" },
    targetLang: {
      type: 'string',
      maxLength: 64,
      description: "force this target language token (its name in the plan's tokenizer) as the first generated token",
    },
    truncate: { type: 'boolean', description: "cut sources over the plan's maxSrcLen instead of failing them" },
    strategy: {
      type: 'string',
      maxLength: 16,
      description: 'decoding strategy: auto, greedy, beam, pj, pgj, hgj, lookup',
    },
    lengthPenalty: {
      type: 'number',
      minimum: -10,
      maximum: 10,
      description: "generate()'s length_penalty (default: the plan's, else 1)",
    },
    earlyStopping: {
      anyOf: [{ type: 'boolean' }, { type: 'string', enum: ['never'] }],
      description: 'generate()\'s early_stopping: true, false or "never" (default: the plan\'s, else false)',
    },
    minNewTokens: {
      type: 'integer',
      minimum: 0,
      maximum: 65536,
      description: "generate()'s min_new_tokens (default: from the plan's min_length, else 0)",
    },
    noRepeatNgramSize: {
      type: 'integer',
      minimum: 0,
      maximum: 65536,
      description: "generate()'s no_repeat_ngram_size; 0 = off (default: the plan's)",
    },
    encoderNoRepeatNgramSize: {
      type: 'integer',
      minimum: 0,
      maximum: 65536,
      description: "generate()'s encoder_no_repeat_ngram_size; 0 = off (default: the plan's)",
    },
    repetitionPenalty: {
      type: 'number',
      minimum: 0.01,
      maximum: 100,
      description: "generate()'s repetition_penalty; 1 = off (default: the plan's)",
    },
    doSample: {
      type: 'boolean',
      description: "generate()'s do_sample: sample each token (greedy strategy; default: the plan's, else false)",
    },
    temperature: {
      type: 'number',
      exclusiveMinimum: 0,
      maximum: 100,
      description: "generate()'s temperature (sampling; default: the plan's, else 1)",
    },
    topK: {
      type: 'integer',
      minimum: 0,
      maximum: 2147483647,
      description: "generate()'s top_k; 0 = all tokens (sampling; default: the plan's, else 50)",
    },
    topP: {
      type: 'number',
      exclusiveMinimum: 0,
      maximum: 1,
      description: "generate()'s top_p (sampling; default: the plan's, else 1)",
    },
    seed: {
      type: 'integer',
      minimum: 0,
      maximum: 9007199254740991,
      description:
        'random seed of sampling: sentence i of the request draws from the stream of (seed, i), whatever else the server decodes beside it (default 0)',
    },
  },
} as const;

export const TRANSLATE_BODY_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  required: ['text'],
  properties: {
    text: {
      description: 'one sentence, or an array of sentences (answered in input order)',
      anyOf: [{ type: 'string' }, { type: 'array', items: { type: 'string' } }],
    },
    model: {
      type: 'string',
      maxLength: 256,
      description: 'the model (GET /v1/models); may be left out when the server has one',
    },
    options: OPTIONS_SCHEMA,
  },
} as const;

/** One sentence's answer: its translation, or the error it failed with alone. */
export const TRANSLATION_SCHEMA = {
  type: 'object',
  properties: {
    text: { type: 'string' },
    tokens: { type: 'integer', description: 'tokens generated (the eos not counted)' },
    score: { type: 'number' },
    nBest: {
      type: 'array',
      items: { type: 'object', properties: { text: { type: 'string' }, score: { type: 'number' } } },
    },
    error: { type: 'object', properties: { code: { type: 'string' }, message: { type: 'string' } } },
  },
} as const;

export const TRANSLATE_ROUTE_SCHEMA = {
  summary: 'Translate sentences',
  description:
    'Answers `{ "translations": [...] }` in input order. With `Accept: application/x-ndjson` (or `text/event-stream`) each sentence is written as soon as it is finished, as `{ "index": i, ... }` (one JSON object a line, or one SSE `data:` event), then `{ "done": true }`.',
  body: TRANSLATE_BODY_SCHEMA,
  response: {
    200: { type: 'object', properties: { translations: { type: 'array', items: TRANSLATION_SCHEMA } } },
  },
} as const;
