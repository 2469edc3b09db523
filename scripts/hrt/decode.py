#!/usr/bin/python3
"""Torch HRT greedy decoding of a train.py checkpoint (docs/hrt.md section 3, b_at = b_nat = 1), without a cache:
the reference the exported graphs are checked against (scripts/hrt/check.ts --expect FILE).

  /usr/bin/python3 scripts/hrt/decode.py --ckpt .scratch/hrt/smoke-hrt/ckpt.pt --n 20 --json .scratch/hrt/torch.json
"""
import argparse
import json
import math
import os
import sys

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from model import ES_EN_DEFAULT, SPECIALS, VOCAB, Seq2Seq, causal_mask_add, pad_mask_add  # noqa: E402


EOS = 0


def hrt_greedy(m, src, k, max_len, bos, mask_id, min_steps=0):
    """One sentence: (output ids without eos, Skip-AT tokens z incl. eos, score S of eq. 2)."""
    ids = torch.tensor([src])
    smask = torch.ones_like(ids)
    enc = m.encode(ids, smask)
    cross = m.cross_kv(enc)
    m_at = math.ceil(max_len / k)
    z, at = [], 0.0
    for s in range(m_at):
        inp = torch.tensor([[bos[k]] + z])
        pos = torch.arange(len(z) + 1)[None, :] * k
        h, _ = m.decode(inp, pos, causal_mask_add(inp.size(1)), cross, smask)
        lp = torch.log_softmax(m.logits(h[:, -1]).double(), -1)[0]
        choose = lp.clone()
        if s < min_steps:  # smoke tests of barely trained models: no eos before min_steps Skip-AT tokens
            choose[EOS] = -math.inf
        forced = s == m_at - 1  # forced eos at the last step; a forced token scores 0 (generate()'s rule)
        tok = EOS if forced else int(torch.argmax(choose))
        at += 0.0 if forced else float(lp[tok])
        z.append(tok)
        if tok == EOS:
            break
    if k == 1:
        return z[:-1] if z[-1] == EOS else z, z, at
    n = len(z) * k
    inp = torch.tensor([[z[p // k - 1] if p % k == 0 else mask_id for p in range(1, n + 1)]])
    pos = torch.arange(1, n + 1)[None, :]
    h, _ = m.decode(inp, pos, pad_mask_add(torch.ones_like(inp)), cross, smask)
    lp = torch.log_softmax(m.logits(h[0]).double(), -1)
    y, nat = [], 0.0
    for p in range(1, n + 1):
        if p % k == 0:
            y.append(z[p // k - 1])
        else:
            t = int(torch.argmax(lp[p - 1]))
            nat += float(lp[p - 1, t])
            y.append(t)
    out = y[:y.index(EOS)] if EOS in y else y
    return out[:max_len - 1], z, at + nat


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ckpt", required=True)
    p.add_argument("--data", default=ES_EN_DEFAULT)
    p.add_argument("--n", type=int, default=20, help="first N test sentences (test_ids.json)")
    p.add_argument("--max-len", type=int, default=64)
    p.add_argument("--json", default=None)
    p.add_argument("--min-steps", type=int, default=0, help="ban eos in the first N Skip-AT steps (smoke tests only)")
    a = p.parse_args()
    torch.set_num_threads(1)
    state = torch.load(a.ckpt)
    t = state["args"]
    m = Seq2Seq(t["d"], t["enc_layers"], t["dec_layers"], t["heads"], t["ffn"], 0.0, 0 if t["twin"] else len(SPECIALS))
    m.load_state_dict(state["model"])
    m.eval()
    srcs = json.load(open(os.path.join(a.data, "test_ids.json")))["src_ids"][: a.n]
    bos = {1: 0, 2: VOCAB + SPECIALS.index("bos_2"), 3: VOCAB + SPECIALS.index("bos_3")}
    ks = [1] if t["twin"] else [1] + [int(x) for x in t["chunk_sizes"].split(",")]
    res = {"max_len": a.max_len, "n": a.n, "min_steps": a.min_steps, "out": {}}
    with torch.no_grad():
        for k in ks:
            rows = [hrt_greedy(m, s, k, a.max_len, bos, VOCAB + SPECIALS.index("mask"), a.min_steps) for s in srcs]
            res["out"][str(k)] = [{"ids": o, "z": z, "score": sc} for o, z, sc in rows]
            print(f"k={k}: " + " | ".join(str(r[0][:12]) for r in rows[:3]))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f)


if __name__ == "__main__":
    main()
