// CLI: writes a random-weight Marian encoder-decoder in the Hugging Face seq2seq ONNX layout (see scripts/make-model/).
import { DEFAULTS, makeModel, type MakeModelOptions } from './make-model/generate.ts';
import type { Activation } from './make-model/marian.ts';

const USAGE = `usage: npm run make-model -- --arch marian --d 512 --layers 6,6 --heads 8 --ffn 2048 --vocab 58101 -o DIR
       [--seed N (${DEFAULTS.seed})] [--max-pos N (${DEFAULTS.maxPos})] [--activation relu|gelu|swish (${DEFAULTS.activation})] [--pre-norm] [--hrt]

Writes encoder_model.onnx, decoder_model.onnx, decoder_with_past_model.onnx, weights.bin and config.json:
the graph structure of the es-en export (opset 17, float32) with seeded random weights.
--layers E,D sets encoder and decoder layers (a single N means N,N).
--pre-norm makes pre-norm layers (x + SubLayer(LN(x)), a final LayerNorm after each stack; config normalize_before: true)
instead of the default post-norm ones (LN(x + SubLayer(x)), as es-en).
--hrt makes an HRT-contract model (docs/hrt.md): position_ids inputs on both decoders, decoder_nat_model.onnx, three
input-only ids after the vocabulary and config.json's hrt section.`;

function intArg(name: string, v: string | undefined): number {
  if (v === undefined || !/^\d+$/.test(v))
    throw new Error(`--${name} needs a non-negative integer, got ${v ?? 'nothing'}`);
  return Number(v);
}

/** A flag: absent or bare (--x) or --x=true|false. */
function boolArg(name: string, v: string | undefined): boolean {
  if (v === undefined || v === 'false') return false;
  if (v === 'true') return true;
  throw new Error(`--${name} takes no value (or =true / =false), got ${v}`);
}

/** Options without a value. */
const FLAGS = ['pre-norm', 'hrt'];

function parseArgs(argv: string[]): MakeModelOptions {
  const seen = new Map<string, string>();
  for (let i = 0; i < argv.length; i++) {
    let a = argv[i];
    if (a === '-h' || a === '--help') throw Object.assign(new Error(USAGE), { usage: true });
    if (a === '-o') a = '--out';
    if (!a.startsWith('--')) throw new Error(`unexpected argument ${a}`);
    if (FLAGS.includes(a.slice(2))) {
      seen.set(a.slice(2), 'true');
      continue;
    }
    let [key, value] = a.slice(2).split(/=(.*)/s, 2) as [string, string | undefined];
    if (value === undefined) value = argv[++i];
    if (value === undefined) throw new Error(`--${key} needs a value`);
    seen.set(key, value);
  }
  const known = ['arch', 'd', 'layers', 'heads', 'ffn', 'vocab', 'out', 'seed', 'max-pos', 'activation', ...FLAGS];
  for (const k of seen.keys()) if (!known.includes(k)) throw new Error(`unknown option --${k}`);
  for (const k of ['d', 'layers', 'heads', 'ffn', 'vocab', 'out'])
    if (!seen.has(k)) throw new Error(`missing --${k === 'out' ? 'o DIR' : k}`);
  const layers = seen.get('layers')!.split(',');
  if (layers.length > 2) throw new Error(`--layers wants E,D, got ${seen.get('layers')}`);
  const arch = seen.get('arch') ?? DEFAULTS.arch;
  if (arch !== 'marian') throw new Error(`unsupported --arch ${arch} (only marian)`);
  return {
    arch,
    d: intArg('d', seen.get('d')),
    encoderLayers: intArg('layers', layers[0]),
    decoderLayers: intArg('layers', layers[1] ?? layers[0]),
    heads: intArg('heads', seen.get('heads')),
    ffn: intArg('ffn', seen.get('ffn')),
    vocab: intArg('vocab', seen.get('vocab')),
    out: seen.get('out')!,
    seed: seen.has('seed') ? intArg('seed', seen.get('seed')) : DEFAULTS.seed,
    maxPos: seen.has('max-pos') ? intArg('max-pos', seen.get('max-pos')) : DEFAULTS.maxPos,
    activation: (seen.get('activation') ?? DEFAULTS.activation) as Activation,
    ...(boolArg('pre-norm', seen.get('pre-norm')) ? { preNorm: true } : {}),
    ...(boolArg('hrt', seen.get('hrt')) ? { hrt: true } : {}),
  };
}

function main(): void {
  let opts: MakeModelOptions;
  try {
    opts = parseArgs(process.argv.slice(2));
  } catch (e) {
    const err = e as Error & { usage?: boolean };
    if (err.usage) {
      console.log(USAGE);
      return;
    }
    console.error(`make-model: ${err.message}\n\n${USAGE}`);
    process.exit(2);
  }
  try {
    const r = makeModel(opts);
    const mb = (n: number) => (n / 1e6).toFixed(n < 1e6 ? 3 : 1);
    console.log(
      `make-model: marian d=${opts.d} layers=${opts.encoderLayers},${opts.decoderLayers} heads=${opts.heads} ffn=${opts.ffn} ` +
        `vocab=${opts.vocab} max-pos=${opts.maxPos} ${opts.activation}${opts.preNorm ? ' pre-norm' : ''}${opts.hrt ? ' hrt' : ''} seed=${opts.seed}: ${(r.parameters / 1e6).toFixed(2)} M parameters`,
    );
    for (const f of r.files) console.log(`  ${opts.out}/${f.name}  ${mb(f.bytes)} MB`);
    console.log(`  done in ${r.seconds.toFixed(2)} s`);
  } catch (e) {
    console.error(`make-model: ${(e as Error).message}`);
    process.exit(1);
  }
}

main();
