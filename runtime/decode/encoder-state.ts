// The source side of a decoding batch in resident buffers of the plan: the encoder attention mask and the encoder K/V
// of every decoder layer (fed to each step, gathered by row natively), the encoder hidden states and the vocab mask.
import type { Plan } from '../plan.ts';
import {
  dtypeBytes,
  type FeedTensor,
  type Resident,
  type ResidentTensor,
  type RtDType,
  type RtTensor,
} from '../tensor.ts';
import { alignRegion } from './kv-cache.ts';
import { keepsRows, moveRows, movesDown, Spans } from './row-spans.ts';

/** One per-row tensor ([rows, ...]) stored at `offset` of the row buffers. */
export interface RowRegion {
  /** Its feed name in decoder steps. */
  name: string;
  dtype: RtDType;
  /** Dims after the batch dim. */
  rowDims: number[];
  rowBytes: number;
  offset: number;
}

/** The first decoder step's encoder K/V output for feed `past_key_values.X` is `present.X`. */
const presentOf = (feed: string) => feed.replace(/^past_key_values\./, 'present.');

export class EncoderState {
  /** The mask and encoder K/V, [maxRows, ...] each; `spare` has the same layout (gathers go through it). */
  private buf: Resident;
  private spare: Resident;
  /** The encoder hidden states and the vocab mask: written once, read by the first step (hidden) or every step (vocab). */
  private readonly fixed: Resident;
  private readonly regions: RowRegion[];
  private readonly hiddenOut: { dtype: RtDType; dims: number[] };
  private readonly vocabFeeds: Record<string, ResidentTensor> = {};
  rows: number;

  /**
   * mask: the host encoder attention mask [b, S]; hidden: the encoder output's dtype and dims; kv: the first decoder
   * step's present.*.encoder.* outputs, their dtypes and dims; vocab: host feeds every step takes (vocab_active);
   * take: where the buffers come from (a batch's lease of the plan's buffer pool).
   */
  constructor(
    private readonly plan: Plan,
    readonly maxRows: number,
    mask: RtTensor,
    hidden: { dtype: RtDType; dims: number[] },
    kv: Record<string, { dtype: RtDType; dims: number[] }>,
    vocab: Record<string, RtTensor>,
    take: (bytes: number) => Resident,
  ) {
    const rows = [
      { name: 'encoder_attention_mask', dtype: mask.dtype, rowDims: mask.dims.slice(1) },
      ...Object.entries(kv).map(([present, t]) => ({
        name: present.replace(/^present\./, 'past_key_values.'),
        dtype: t.dtype,
        rowDims: t.dims.slice(1),
      })),
    ];
    let offset = 0;
    this.regions = rows.map((r) => {
      const rowBytes = r.rowDims.reduce((a, b) => a * b, 1) * dtypeBytes(r.dtype);
      const region = { ...r, rowBytes, offset };
      offset += alignRegion(maxRows * rowBytes);
      return region;
    });
    this.rows = mask.dims[0]!;
    this.buf = take(offset);
    this.spare = take(offset);
    this.hiddenOut = hidden;
    let fixed = alignRegion(hidden.dims.reduce((a, b) => a * b, 1) * dtypeBytes(hidden.dtype));
    const vocabAt: [string, RtTensor, number][] = [];
    for (const [name, t] of Object.entries(vocab)) {
      vocabAt.push([name, t, fixed]);
      fixed += alignRegion(t.data.byteLength);
    }
    this.fixed = take(fixed);
    plan.residentWrite(this.buf, 0, mask.data);
    for (const [name, t, at] of vocabAt) {
      plan.residentWrite(this.fixed, at, t.data);
      this.vocabFeeds[name] = { dtype: t.dtype, dims: t.dims, resident: this.fixed, offset: at };
    }
  }

  /** Where the encoder writes last_hidden_state (and the first decoder step reads it). */
  hidden(): ResidentTensor {
    return { ...this.hiddenOut, resident: this.fixed, offset: 0 };
  }

  /** Where the first decoder step writes its present.*.encoder.* outputs (rows 0..rows-1 of their regions). */
  presentSlots(): Record<string, ResidentTensor> {
    return Object.fromEntries(this.regions.slice(1).map((r) => [presentOf(r.name), this.tensor(r)]));
  }

  /** The encoder attention mask. */
  mask(): ResidentTensor {
    return this.tensor(this.regions[0]!);
  }

  /** The feeds every decoder step takes from the source side: the mask, the encoder K/V and the vocab feeds. */
  feeds(): Record<string, FeedTensor> {
    const out: Record<string, FeedTensor> = { ...this.vocabFeeds };
    for (const r of this.regions) out[r.name] = this.tensor(r);
    return out;
  }

  /** Feeds of the vocabulary rewrite only (for the first step, which takes the mask and hidden states instead of K/V). */
  vocab(): Record<string, FeedTensor> {
    return this.vocabFeeds;
  }

  /** Where rows 0..rows-1 live: the buffer and, per region, its feed name, dtype, row dims and byte offset (rows a batch copies out when they join another). */
  layout(): { buf: Resident; regions: readonly Readonly<RowRegion>[] } {
    return { buf: this.buf, regions: this.regions };
  }

  private tensor(r: RowRegion): ResidentTensor {
    return { dtype: r.dtype, dims: [this.rows, ...r.rowDims], resident: this.buf, offset: r.offset };
  }

  /** Row i takes the source of old row from[i] (rows already checked by the caller). */
  select(from: number[]): void {
    if (keepsRows(from, this.rows)) return;
    const down = movesDown(from);
    const spans = new Spans(this.regions.length * from.length);
    for (const r of this.regions) {
      from.forEach((src, i) => {
        if (!(down && src === i)) spans.push(r.offset + src * r.rowBytes, r.offset + i * r.rowBytes, r.rowBytes);
      });
    }
    [this.buf, this.spare] = moveRows(this.plan, this.buf, this.spare, spans, down);
    this.rows = from.length;
  }
}
