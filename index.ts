// planc's public Node API (the package's `exports`): plans, translation, decoding options, tensors and error types.
export { loadPlan, loadPlanBytes, Plan, type IOInfo, type ShapeFeed } from './runtime/plan.ts';
export {
  translate,
  translateStream,
  translateIdsStream,
  type TranslateOptions,
  type StreamedTranslation,
  type StreamedIds,
} from './runtime/translate.ts';
export { translateIds, type TranslationResult } from './runtime/decode/translate-ids.ts';
export { DEFAULT_DECODING_OPTIONS, validateDecodingOptions, type DecodingOptions } from './runtime/decode/options.ts';
export type { JacobiSentenceTrace } from './runtime/decode/jacobi-trace.ts';
export {
  tensorFrom,
  toNumbers,
  type FeedTensor,
  type Resident,
  type ResidentTensor,
  type RtData,
  type RtDType,
  type RtTensor,
} from './runtime/tensor.ts';
export type { Tokenizer, TokenizerKind } from './runtime/tokenizer/tokenizer.ts';
export {
  cudaStatus,
  nativeAvailable,
  nativeInfo,
  setThreads,
  NativeUnavailableError,
  type CudaStatus,
  type IsaLevel,
  type NativeInfo,
} from './runtime/native.ts';
export { createServer, type PlancServer, type ServeOptions } from './serve/server.ts';
export { submit, submitStream, type SubmitClientOptions } from './serve/queue/submit.ts';
export type { Translation } from './serve/translate-texts.ts';
export {
  CODES,
  PlancError,
  type Code,
  type ErrorDetail,
  type FromTemplate,
  type OptionNamer,
  type Text,
  type Where,
} from './compiler/diagnostics.ts';
export { MESSAGES, type MessageId, type MessageParams, type OptionFacts } from './compiler/diagnostics-catalog.ts';
export type { PlanHeader } from './compiler/plan/types.ts';
