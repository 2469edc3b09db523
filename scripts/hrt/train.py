#!/usr/bin/python3
"""Trains the small es-en HRT model (docs/hrt.md) or, with --twin, its autoregressive twin of the same size and budget.

HRT: each sentence pair of a batch gives one causal sample and one bidirectional sample. A share p_k = (t/T)^lambda of
the pairs (curriculum, paper eq. 1) gets the primary tasks, Skip-AT and Skip-CMLM with the batch's chunk size k (drawn
from --chunk-sizes); the rest the auxiliary tasks AT and CMLM. The twin: AT only, the same pairs, steps and schedule.
Deterministic given --seed (one thread; per-step seeded randomness, so --resume continues the same run).

  nice -n 19 /usr/bin/python3 scripts/hrt/train.py --out .scratch/hrt/hrt --steps 900 --seed 1
  nice -n 19 /usr/bin/python3 scripts/hrt/train.py --out .scratch/hrt/at --steps 900 --seed 1 --twin
Debian's python3-torch, python3-sentencepiece (apt-get install -y python3-torch python3-sentencepiece); /usr/bin/python3.
"""
import argparse
import json
import math
import os
import sys
import time

# one BLAS thread unless --threads says otherwise (OpenBLAS reads this when torch loads)
_t = sys.argv[sys.argv.index("--threads") + 1] if "--threads" in sys.argv[:-1] else "1"
os.environ.setdefault("OPENBLAS_NUM_THREADS", _t)
os.environ.setdefault("OMP_NUM_THREADS", _t)

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from model import ES_EN_DEFAULT, SPECIALS, UNUSED_LOGIT, VOCAB, Seq2Seq, causal_mask_add, pad_mask_add  # noqa: E402


EOS = PAD = 0
BOS = {1: 0, 2: VOCAB + SPECIALS.index("bos_2"), 3: VOCAB + SPECIALS.index("bos_3")}
MASK = VOCAB + SPECIALS.index("mask")


def parse():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="checkpoint folder (ckpt.pt, train.jsonl, args.json)")
    p.add_argument("--data", default=ES_EN_DEFAULT, help="folder with train.es/en, dev.es/en, vocab.esen.spm")
    p.add_argument("--cache", default=None, help="token-id cache folder (default: OUT/../data-cache)")
    p.add_argument("--twin", action="store_true", help="train the autoregressive twin (AT only, no special ids)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--steps", type=int, default=900, help="total steps T (the curriculum and LR schedule span T)")
    p.add_argument("--stop-after", type=int, default=None, help="stop at this step (a piece of a T-step run; --resume goes on)")
    p.add_argument("--resume", action="store_true")
    p.add_argument("--batch-tokens", type=int, default=1500, help="padded target tokens per step (eos included)")
    p.add_argument("--max-len", type=int, default=128, help="source/target tokens kept, eos included")
    p.add_argument("--d", type=int, default=256)
    p.add_argument("--ffn", type=int, default=1024)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--enc-layers", type=int, default=3)
    p.add_argument("--dec-layers", type=int, default=2)
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--label-smoothing", type=float, default=0.1)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--warmup", type=int, default=150)
    p.add_argument("--chunk-sizes", default="2,3", help="k values of the primary tasks, one per batch")
    p.add_argument("--curriculum-lambda", type=float, default=1.0, help="p_k = (t/T)^lambda")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--save-every", type=int, default=250)
    p.add_argument("--log-every", type=int, default=10)
    p.add_argument("--limit-pairs", type=int, default=None, help="use only the first N training pairs (tests)")
    return p.parse_args()


def tokenize(args):
    """Token ids of train/dev (eos appended), cached as .npy (concatenated ids + offsets)."""
    cache = args.cache or os.path.join(os.path.dirname(os.path.abspath(args.out)), "data-cache")
    os.makedirs(cache, exist_ok=True)
    out = {}
    sp = None
    for split in ("train", "dev"):
        for lang in ("es", "en"):
            f = os.path.join(cache, f"{split}.{lang}.npz")
            if not os.path.exists(f):
                if sp is None:
                    import sentencepiece as spm
                    sp = spm.SentencePieceProcessor(model_file=os.path.join(args.data, "vocab.esen.spm"))
                with open(os.path.join(args.data, f"{split}.{lang}"), encoding="utf-8") as fh:
                    lines = [line.rstrip("\n") for line in fh]
                ids = sp.encode(lines)
                lens = np.array([len(x) for x in ids], dtype=np.int64)
                flat = np.array([t for x in ids for t in x], dtype=np.int32)
                np.savez(f + ".tmp.npz", flat=flat, offs=np.concatenate([[0], np.cumsum(lens)]))
                os.replace(f + ".tmp.npz", f)
            z = np.load(f)
            flat, offs = z["flat"], z["offs"]
            out[(split, lang)] = [flat[offs[i]:offs[i + 1]] for i in range(len(offs) - 1)]
    return out


def with_eos(x, max_len):
    return np.concatenate([x[: max_len - 1], [EOS]]).astype(np.int64)


class Batches:
    """Step t -> the pair indices of its batch. Per epoch: a seeded permutation cut into chunks of 100,000 target tokens,
    each sorted by target length and cut into batches of at most --batch-tokens padded target tokens (eos included,
    as fairseq counts them); the epoch's batches in seeded order."""

    def __init__(self, lengths, batch_tokens, seed):
        self.lengths, self.batch_tokens, self.seed, self.cache = lengths + 1, batch_tokens, seed, {}
        self.sizes = []  # batches per epoch, as built

    def epoch(self, e):
        if e not in self.cache:
            rng = np.random.default_rng([self.seed, 7, e])
            perm = rng.permutation(len(self.lengths))
            per_chunk = max(1, 100_000 // int(self.lengths.mean()))
            parts = []
            for s in range(0, len(perm), per_chunk):
                c = perm[s:s + per_chunk]
                c = c[np.argsort(self.lengths[c], kind="stable")]
                start = 0
                for i in range(1, len(c) + 1):
                    if i == len(c) or (i + 1 - start) * self.lengths[c[i]] > self.batch_tokens:
                        parts.append(c[start:i])
                        start = i
            order = rng.permutation(len(parts))
            self.cache = {e: [parts[i] for i in order]}
        return self.cache[e]

    def at(self, t):
        e = 0
        while True:
            b = self.epoch(e)
            if t < len(b):
                return b[t]
            t -= len(b)
            e += 1

    def pairs_per_epoch(self):
        return len(self.lengths)


def pad(rows, value):
    n = max(len(r) for r in rows)
    return torch.tensor(np.array([np.concatenate([r, np.full(n - len(r), value, dtype=np.int64)]) for r in rows]))


def ar_sample(y, k):
    """AT (k = 1) / Skip-AT: inputs [BOS_k], y_k, ..., y_(m-1)k at positions 0, k, ..., (m-1)k; targets y_k..y_mk
    (y 1-based, padded with eos to a multiple of k)."""
    n = k * math.ceil(len(y) / k)
    yy = np.concatenate([y, np.full(n - len(y), EOS, dtype=np.int64)])
    tgt = yy[k - 1::k]  # y_k, y_2k, ..., y_mk
    inp = np.concatenate([[BOS[k]], tgt[:-1]]).astype(np.int64)
    pos = np.arange(len(tgt), dtype=np.int64) * k
    return inp, pos, tgt


def nar_sample(y, k, rng):
    """Skip-CMLM (k >= 2): positions 1..mk, [MASK] where p % k != 0, y_p where p % k == 0; targets at the masks.
    CMLM (k = None): y at positions 1..N, a uniform number 1..N of uniformly chosen positions masked."""
    if k is None:
        yy = y
        masked = np.zeros(len(y), dtype=bool)
        masked[rng.choice(len(y), size=rng.integers(1, len(y) + 1), replace=False)] = True
    else:
        n = k * math.ceil(len(y) / k)
        yy = np.concatenate([y, np.full(n - len(y), EOS, dtype=np.int64)])
        masked = (np.arange(1, n + 1) % k) != 0
    inp = np.where(masked, MASK, yy).astype(np.int64)
    tgt = np.where(masked, yy, -100).astype(np.int64)
    return inp, np.arange(1, len(yy) + 1, dtype=np.int64), tgt


def make_batch(src, tgt, idx, step, args, chunk_sizes):
    rng = np.random.default_rng([args.seed, 11, step])
    p_k = 0.0 if args.twin else min(1.0, (step / args.steps) ** args.curriculum_lambda)
    k = int(rng.choice(chunk_sizes))
    n_primary = int(round(p_k * len(idx)))
    s_rows, ar, nar = [], [], []
    for j, i in enumerate(idx):
        s_rows.append(with_eos(src[i], args.max_len))
        y = with_eos(tgt[i], args.max_len)
        primary = j < n_primary
        ar.append(ar_sample(y, k if primary else 1))
        if not args.twin:
            nar.append(nar_sample(y, k if primary else None, rng))
    s = pad(s_rows, PAD)
    b = {"src": s, "src_mask": pad([np.ones(len(r), dtype=np.int64) for r in s_rows], 0),
         "ar": tuple(pad([a[c] for a in ar], v) for c, v in ((0, PAD), (1, 0), (2, -100))),
         "k": k, "p_k": p_k, "n_primary": n_primary}
    if nar:
        b["nar"] = tuple(pad([a[c] for a in nar], v) for c, v in ((0, PAD), (1, 0), (2, -100)))
        b["nar_mask"] = pad([np.ones(len(a[0]), dtype=np.int64) for a in nar], 0)
    return b


def losses(model, b, sub_of, tv, label_smoothing):
    """Summed label-smoothed CE and token counts of the causal and bidirectional samples."""
    enc = model.encode(b["src"], b["src_mask"])
    cross = model.cross_kv(enc)
    out = {}
    parts = [("ar", b["ar"], causal_mask_add(b["ar"][0].size(1)))]
    if "nar" in b:
        parts.append(("nar", b["nar"], pad_mask_add(b["nar_mask"])))
    for name, (inp, pos, tgt), mask in parts:
        h, _ = model.decode(inp, pos, mask, cross, b["src_mask"])
        sel = tgt >= 0
        tsub = sub_of[tgt[sel]]
        keep = tsub >= 0  # dev targets outside the training-target vocabulary are left out
        hs = h[sel][keep]
        logits = model.logits(hs, tv)
        ce = F.cross_entropy(logits, tsub[keep], reduction="sum", label_smoothing=label_smoothing)
        nll = F.cross_entropy(logits.detach(), tsub[keep], reduction="sum")
        out[name] = (ce, nll.item(), int(keep.sum()))
    return out


def lr_at(step, args):
    if step < args.warmup:
        return args.lr * (step + 1) / args.warmup
    return args.lr * max(0.0, (args.steps - step) / max(1, args.steps - args.warmup))


def evaluate(model, data, tv, sub_of, args, chunk_sizes):
    """Dev NLL per token of each task (k = chunk_sizes[0] for the primary tasks), dropout off."""
    model.eval()
    res = {}
    src, tgt = data[("dev", "es")], data[("dev", "en")]
    idx = np.arange(len(src))
    tasks = [("at", 0.0)] if args.twin else [("at+cmlm", 0.0), (f"skip{chunk_sizes[0]}", 1.0)]
    with torch.no_grad():
        for name, pk in tasks:
            tot = {}
            for s in range(0, len(idx), 100):
                a = argparse.Namespace(**vars(args))
                a.steps, a.curriculum_lambda = 1, 1.0
                b = make_batch(src, tgt, idx[s:s + 100], 1 if pk else 0, a, chunk_sizes[:1])
                for part, (_, nll, n) in losses(model, b, sub_of, tv, 0.0).items():
                    t = tot.setdefault(part, [0.0, 0])
                    t[0] += nll
                    t[1] += n
            for part, (nll, n) in tot.items():
                res[f"{name}/{part}"] = round(nll / max(1, n), 4)
    model.train()
    return res


def main():
    args = parse()
    torch.set_num_threads(args.threads)
    torch.use_deterministic_algorithms(True)
    os.makedirs(args.out, exist_ok=True)
    chunk_sizes = [int(x) for x in args.chunk_sizes.split(",")]
    assert all(k in BOS and k >= 2 for k in chunk_sizes), "chunk sizes: 2 and/or 3 (one [BOS_k] id each)"
    t0 = time.time()
    data = tokenize(args)
    src, tgt = data[("train", "es")], data[("train", "en")]
    keep = [i for i in range(len(src)) if len(src[i]) > 0 and len(tgt[i]) > 0]
    if args.limit_pairs:
        keep = keep[: args.limit_pairs]
    src, tgt = [src[i] for i in keep], [tgt[i] for i in keep]
    # training-target vocabulary: the ids the output layer is trained on (others get UNUSED_LOGIT in the export)
    seen = np.zeros(VOCAB, dtype=bool)
    seen[[EOS, 1]] = True
    for y in tgt:
        seen[y] = True
    tv = torch.tensor(np.nonzero(seen)[0], dtype=torch.int64)
    sub_of = torch.full((VOCAB,), -1, dtype=torch.int64)
    sub_of[tv] = torch.arange(len(tv))
    print(f"data: {len(src)} pairs, target vocabulary {len(tv)} ids, tokenized in {time.time() - t0:.1f}s", flush=True)

    torch.manual_seed(args.seed)
    model = Seq2Seq(args.d, args.enc_layers, args.dec_layers, args.heads, args.ffn, args.dropout,
                    0 if args.twin else len(SPECIALS))
    with torch.no_grad():
        model.final_logits_bias.fill_(UNUSED_LOGIT)
        model.final_logits_bias[tv] = 0.0
    opt = torch.optim.Adam(model.parameters(), lr=args.lr, betas=(0.9, 0.98), eps=1e-9)
    ck = os.path.join(args.out, "ckpt.pt")
    step = 0
    if args.resume and os.path.exists(ck):
        state = torch.load(ck)
        fixed = ("twin", "seed", "steps", "batch_tokens", "max_len", "d", "ffn", "heads", "enc_layers", "dec_layers",
                 "dropout", "label_smoothing", "lr", "warmup", "chunk_sizes", "curriculum_lambda", "limit_pairs", "data")
        diff = [f"--{k.replace('_', '-')} {state['args'].get(k)} (now {getattr(args, k)})" for k in fixed
                if state["args"].get(k) != getattr(args, k)]
        if diff:
            sys.exit(f"--resume: {ck} was trained with other settings: {', '.join(diff)}")
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        step = state["step"]
        print(f"resumed at step {step}", flush=True)
    n_params = sum(p.numel() for p in model.parameters())
    with open(os.path.join(args.out, "args.json"), "w") as f:
        json.dump({**vars(args), "params": n_params, "torch": torch.__version__, "target_vocab": len(tv)}, f, indent=1)
    print(f"model: {n_params:,} parameters; {'twin (AT)' if args.twin else 'HRT'}; T = {args.steps} steps", flush=True)

    def save(step):
        torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step, "args": vars(args),
                    "target_vocab": tv}, ck + ".tmp")
        os.replace(ck + ".tmp", ck)

    batches = Batches(np.minimum([len(y) for y in tgt], args.max_len - 1), args.batch_tokens, args.seed)
    log = open(os.path.join(args.out, "train.jsonl"), "a")
    stop = min(args.steps, args.stop_after or args.steps)
    model.train()
    window = []
    while step < stop:
        ts = time.time()
        torch.manual_seed(args.seed * 1_000_003 + step)  # dropout of this step
        b = make_batch(src, tgt, batches.at(step), step, args, chunk_sizes)
        for g in opt.param_groups:
            g["lr"] = lr_at(step, args)
        parts = losses(model, b, sub_of, tv, args.label_smoothing)
        n = sum(p[2] for p in parts.values())
        loss = sum(p[0] for p in parts.values()) / n
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        window.append(time.time() - ts)
        if step % args.log_every == 0 or step == stop:
            rec = {"step": step, "loss": round(loss.item(), 4), "lr": round(lr_at(step - 1, args), 6), "k": b["k"],
                   "p_k": round(b["p_k"], 4), "pairs": len(b["src"]), "tokens": n, "s_per_step": round(sum(window) / len(window), 3),
                   **{f"nll_{k}": round(v[1] / max(1, v[2]), 4) for k, v in parts.items()}}
            window = []
            print(json.dumps(rec), flush=True)
            log.write(json.dumps(rec) + "\n")
            log.flush()
        if step % args.save_every == 0 or step == stop:
            save(step)
    rec = {"step": step, "elapsed_s": round(time.time() - t0, 1)}
    if step == args.steps:  # the end of the run, not of a --stop-after piece
        rec["dev_nll"] = evaluate(model, data, tv, sub_of, args, chunk_sizes)
    print(json.dumps(rec), flush=True)
    log.write(json.dumps(rec) + "\n")


if __name__ == "__main__":
    main()
