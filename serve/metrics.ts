// The service's Prometheus metrics (prom-client), in a registry of its own: requests, sentences, tokens, queue,
// running rows, batch occupancy, step and request times, errors by code.
import { Counter, Gauge, Histogram, Registry } from 'prom-client';

/** What the gauges read when scraped: one entry per model. */
export interface LiveState {
  model: string;
  queued(): number;
  runningRows(): number;
}

/** Gateway mode: the queue's jobs per model and state (waiting, active, delayed), read from Redis when scraped. */
export type JobCounts = () => Promise<{ model: string; state: string; jobs: number }[]>;

export class ServeMetrics {
  readonly registry = new Registry();
  readonly requests: Counter<'model' | 'status'>;
  readonly sentences: Counter<'model' | 'status'>;
  readonly sourceTokens: Counter<'model'>;
  readonly targetTokens: Counter<'model'>;
  readonly errors: Counter<'code'>;
  readonly occupancy: Histogram<'model'>;
  readonly stepSeconds: Histogram<'model'>;
  readonly startSeconds: Histogram<'model'>;
  readonly requestSeconds: Histogram<'model'>;

  constructor(live: LiveState[], jobCounts?: JobCounts) {
    const registers = [this.registry];
    this.requests = new Counter({
      name: 'planc_requests_total',
      help: 'Translation requests answered, by model and HTTP status',
      labelNames: ['model', 'status'],
      registers,
    });
    this.sentences = new Counter({
      name: 'planc_sentences_total',
      help: 'Sentences answered, by model and outcome (ok, error, cancelled)',
      labelNames: ['model', 'status'],
      registers,
    });
    this.sourceTokens = new Counter({
      name: 'planc_source_tokens_total',
      help: 'Source tokens of the sentences translated',
      labelNames: ['model'],
      registers,
    });
    this.targetTokens = new Counter({
      name: 'planc_target_tokens_total',
      help: 'Tokens generated (the eos not counted)',
      labelNames: ['model'],
      registers,
    });
    this.errors = new Counter({
      name: 'planc_errors_total',
      help: 'Errors answered (whole requests and single sentences), by PLANC code',
      labelNames: ['code'],
      registers,
    });
    this.occupancy = new Histogram({
      name: 'planc_batch_occupancy',
      help: 'Rows a decoder step ran, as a fraction of the rows the server decodes at once (starts are not steps)',
      labelNames: ['model'],
      registers,
      buckets: [0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1],
    });
    this.stepSeconds = new Histogram({
      name: 'planc_step_seconds',
      help: "Wall time of one decoder step of the running batch or of one cohort (a cohort's first includes its encoder)",
      labelNames: ['model'],
      registers,
      buckets: [0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1],
    });
    this.startSeconds = new Histogram({
      name: 'planc_start_seconds',
      help: 'Wall time of one start: the encoder and encoder K/V (or first step) of sentences about to join the running batch',
      labelNames: ['model'],
      registers,
      buckets: [0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1],
    });
    this.requestSeconds = new Histogram({
      name: 'planc_request_duration_seconds',
      help: "Time from a translation request's arrival to its last sentence",
      labelNames: ['model'],
      registers,
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    });
    new Gauge({
      name: 'planc_queue_depth',
      help: 'Sentences waiting to start decoding',
      labelNames: ['model'],
      registers,
      collect() {
        for (const l of live) this.set({ model: l.model }, l.queued());
      },
    });
    new Gauge({
      name: 'planc_running_rows',
      help: 'Rows decoding now (sentences × beams)',
      labelNames: ['model'],
      registers,
      collect() {
        for (const l of live) this.set({ model: l.model }, l.runningRows());
      },
    });
    if (jobCounts) {
      new Gauge({
        name: 'planc_queue_jobs',
        help: 'Jobs in the Redis queue by model and state (gateway mode; unreadable while Redis is down)',
        labelNames: ['model', 'state'],
        registers,
        async collect() {
          this.reset();
          for (const c of await jobCounts().catch(() => [])) this.set({ model: c.model, state: c.state }, c.jobs);
        },
      });
    }
  }
}
