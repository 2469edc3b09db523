# CTranslate2 side of `npm run bench -- translate`: converts the HF checkpoint (float32, int8) and times greedy translate_batch; JSON on stdout.
# python3 bench/ct2/run.py CHECKPOINT_DIR TEST_IDS.json WORK_DIR [--threads N] [--reps N] [--max-length N]
# CHECKPOINT_DIR: bench/ct2/hf-checkpoint.ts's output (config.json, tensors/, tokens.json); the converted models go
# under WORK_DIR (the caller removes it). Needs ctranslate2 and transformers (exit 3 without them). Decoding matches
# planc's greedy: beam 1, eos allowed from the first step, at most max-length - 1 tokens (planc's max length 64 counts
# the step where forced_eos_token_id ends the sentence). Ids go in and come out as the vocabulary's pieces.
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

# [batch size, sentences]: as bench/translate.ts (batch 1 on the first 200, batch 32 on all 1,000)
RUNS = [(1, 200), (32, 1000)]


class Vocabulary:
    """The tokenizer the converter asks for: it reads only the vocabulary and the special tokens."""

    def __init__(self, tokens, config):
        self.tokens = tokens
        self.ids = {t: i for i, t in enumerate(tokens)}
        piece = lambda k: tokens[config[k]] if config.get(k) is not None and config[k] < len(tokens) else None
        self.eos_token = piece("eos_token_id")
        self.unk_token = piece("unk_token_id")
        self.bos_token = piece("bos_token_id")
        self.pad_token = piece("pad_token_id")

    def get_vocab(self):
        return dict(self.ids)

    def convert_ids_to_tokens(self, i):
        return self.tokens[i]


def hf_input(ckpt, work, torch):
    """The folder the converter loads: config.json and the state dict (model.safetensors with the safetensors package
    that transformers depends on, else pytorch_model.bin). For Marian, CTranslate2's loader drops the last vocabulary
    row (Transformers' appended <pad>): a zero <pad> row is appended, as Transformers' Marian conversions have it.
    Returns (dir, tokens, whether the decoder starts from a non-zero embedding row, the state dict)."""
    from assemble import load_state

    config = json.load(open(os.path.join(ckpt, "config.json")))
    tokens = json.load(open(os.path.join(ckpt, "tokens.json")))
    state = load_state(ckpt)
    v = config["vocab_size"]
    start_row = state["model.shared.weight"][config["decoder_start_token_id"]]
    if config["model_type"] == "marian":
        for k in ("model.shared.weight", "lm_head.weight"):
            state[k] = torch.cat([state[k], torch.zeros(1, state[k].shape[1])])
        # the <pad> logit can never win (CTranslate2 removes the row anyway)
        state["final_logits_bias"] = torch.cat([state["final_logits_bias"], torch.full((1, 1), -1e9)], dim=1)
        config.update(vocab_size=v + 1, decoder_vocab_size=v + 1, pad_token_id=v)
        tokens = tokens[:v] + ["<pad>"]
    out = os.path.join(work, "hf-input")
    os.makedirs(out, exist_ok=True)
    json.dump(config, open(os.path.join(out, "config.json"), "w"))
    state = {k: t.contiguous() for k, t in state.items()}
    try:
        from safetensors.torch import save_file

        save_file(state, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})
    except ImportError:
        torch.save(state, os.path.join(out, "pytorch_model.bin"))
    return out, tokens, bool(start_row.abs().sum() > 0), state


def convert(ctranslate2, torch, ckpt, work, quantizations):
    """Converts the checkpoint once per quantization; returns {quantization: model dir} and the vocabulary by id."""
    marian = json.load(open(os.path.join(ckpt, "config.json")))["model_type"] == "marian"
    src, tokens, nonzero_start, state = hf_input(ckpt, work, torch)
    keep_start = marian and nonzero_start
    vocab = Vocabulary(tokens, json.load(open(os.path.join(src, "config.json"))))

    class Converter(ctranslate2.converters.TransformersConverter):
        def load_tokenizer(self, tokenizer_class, model_name_or_path, **kwargs):
            return vocab

        def load_model(self, model_class, model_name_or_path, **kwargs):
            model = super().load_model(model_class, model_name_or_path, **kwargs)
            # the checkpoint's tensors as they are, whatever transformers initializes on load (its Marian sinusoids
            # use one frequency formula; an export's position table may use another, as es-en's does)
            r = model.load_state_dict(state, strict=False)
            if r.unexpected_keys:
                raise ValueError("the model has no parameter for %s" % ", ".join(r.unexpected_keys[:5]))
            return model

        def _load(self):
            spec = super()._load()
            # Transformers starts Marian's decoder from the start token's embedding (a zero row in OPUS-MT models, not
            # here): keep that, so that CTranslate2 computes what Transformers and planc compute
            if keep_start:
                spec.decoder.start_from_zero_embedding = False
            return spec

    dirs = {}
    for q in quantizations:
        out = os.path.join(work, "ct2-" + q)
        Converter(src).convert(out, quantization=q, force=True)
        dirs[q] = out
    if marian:
        tokens = tokens[:-1]  # the converter removed <pad>
    return dirs, tokens


def timed(translator, sources, batch, max_length, ids_of):
    t0 = time.perf_counter()
    res = translator.translate_batch(
        sources,
        max_batch_size=batch,
        batch_type="examples",
        beam_size=1,
        max_decoding_length=max_length - 1,
        min_decoding_length=0,
    )
    seconds = time.perf_counter() - t0
    out = [[ids_of[t] for t in r.hypotheses[0]] for r in res]
    tokens = sum(len(o) + 1 for o in out)
    return {
        "seconds": seconds,
        "sentencesPerS": len(out) / seconds,
        "tokensPerS": tokens / seconds,
        "tokens": tokens,
        "ids": out,
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("checkpoint")
    ap.add_argument("test_ids")
    ap.add_argument("work")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--max-length", type=int, default=64)
    a = ap.parse_args()
    try:
        import ctranslate2
        import torch
        import transformers  # noqa: F401 (the converter loads the model with it)
    except ImportError as e:
        print("CTranslate2: cannot import (%s)" % e, file=sys.stderr)
        sys.exit(3)
    os.makedirs(a.work, exist_ok=True)
    dirs, tokens = convert(ctranslate2, torch, a.checkpoint, a.work, ["float32", "int8"])
    ids_of = {t: i for i, t in enumerate(tokens)}
    src_ids = json.load(open(a.test_ids))["src_ids"]
    rows = []
    for q, d in dirs.items():
        translator = ctranslate2.Translator(d, device="cpu", inter_threads=1, intra_threads=a.threads)
        translator.translate_batch([[tokens[i] for i in s] for s in src_ids[:8]], beam_size=1)  # warm-up
        for batch, n in RUNS:
            sources = [[tokens[i] for i in s] for s in src_ids[:n]]
            best = None
            for _ in range(a.reps):
                r = timed(translator, sources, batch, a.max_length, ids_of)
                if best is None or r["seconds"] < best["seconds"]:
                    best = r
            rows.append(dict(quantization=q, batch=batch, sentences=n, computeType=translator.compute_type, **best))
        del translator
    json.dump({"version": ctranslate2.__version__, "threads": a.threads, "rows": rows}, sys.stdout)
    print()


if __name__ == "__main__":
    main()
