# Proves bench/ct2/hf-checkpoint.ts's mapping without transformers: Marian/BART-family forward in torch over the HF state dict, greedy ids vs planc's.
# A one-off check (not in npm test): python3 bench/ct2/check_marian.py CHECKPOINT_DIR SOURCES.json EXPECTED.json [N]
# SOURCES.json: {"src_ids": [...]} (es-en test_ids.json, zoo reference.json); EXPECTED.json: {"ids": [...]} from
# bench/ct2/planc-greedy.ts, or a zoo reference.json (its greedy_ids). Prints how many greedy outputs are identical.
import json
import math
import os
import sys

import torch
import torch.nn.functional as F

ACT = {"relu": F.relu, "gelu": F.gelu, "swish": F.silu, "silu": F.silu,
       "gelu_new": lambda x: F.gelu(x, approximate="tanh")}


class Model:
    def __init__(self, ckpt):
        self.c = json.load(open(os.path.join(ckpt, "config.json")))
        self.w = torch.load(os.path.join(ckpt, "pytorch_model.bin"))
        c = self.c
        self.d = c["d_model"]
        self.pre = bool(c.get("normalize_before", c["model_type"] == "mbart"))
        self.act = ACT[c.get("activation_function", "gelu")]
        self.scale = math.sqrt(self.d) if c.get("scale_embedding", False) else 1.0
        self.offset = 0 if c["model_type"] == "marian" else 2  # BART's learned positions start at row 2

    def p(self, name):
        return self.w[name]

    def lin(self, x, m):
        return F.linear(x, self.p(m + ".weight"), self.p(m + ".bias"))

    def ln(self, x, m):
        return F.layer_norm(x, (self.d,), self.p(m + ".weight"), self.p(m + ".bias"), 1e-5)

    def attn(self, x, kv, m, heads, mask_add):
        b, t, _ = x.shape
        s = kv.shape[1]
        dh = self.d // heads
        q = (self.lin(x, m + ".q_proj") * dh ** -0.5).view(b, t, heads, dh).transpose(1, 2)
        k = self.lin(kv, m + ".k_proj").view(b, s, heads, dh).transpose(1, 2)
        v = self.lin(kv, m + ".v_proj").view(b, s, heads, dh).transpose(1, 2)
        a = torch.softmax(q @ k.transpose(-1, -2) + mask_add, dim=-1)
        return self.lin((a @ v).transpose(1, 2).reshape(b, t, self.d), m + ".out_proj")

    def embed(self, ids, side):
        x = F.embedding(ids, self.p("model.shared.weight")) * self.scale
        pos = torch.arange(ids.shape[1]) + self.offset
        x = x + F.embedding(pos, self.p("model.%s.embed_positions.weight" % side))[None]
        if "model.%s.layernorm_embedding.weight" % side in self.w:
            x = self.ln(x, "model.%s.layernorm_embedding" % side)
        return x

    def block(self, x, sub, norm):
        """A residual sub-layer, post-norm (Marian, BART) or pre-norm (mBART, normalize_before)."""
        if self.pre:
            return x + sub(self.ln(x, norm))
        return self.ln(x + sub(x), norm)

    def encode(self, ids):
        x = self.embed(ids, "encoder")
        h = self.c["encoder_attention_heads"]
        for i in range(self.c["encoder_layers"]):
            l = "model.encoder.layers.%d" % i
            x = self.block(x, lambda y: self.attn(y, y, l + ".self_attn", h, 0.0), l + ".self_attn_layer_norm")
            x = self.block(x, lambda y: self.lin(self.act(self.lin(y, l + ".fc1")), l + ".fc2"), l + ".final_layer_norm")
        if "model.encoder.layer_norm.weight" in self.w:
            x = self.ln(x, "model.encoder.layer_norm")
        return x

    def logits(self, enc, out_ids):
        x = self.embed(out_ids, "decoder")
        t = out_ids.shape[1]
        causal = torch.triu(torch.full((t, t), torch.finfo(torch.float32).min), diagonal=1)
        h = self.c["decoder_attention_heads"]
        for i in range(self.c["decoder_layers"]):
            l = "model.decoder.layers.%d" % i
            x = self.block(x, lambda y: self.attn(y, y, l + ".self_attn", h, causal), l + ".self_attn_layer_norm")
            x = self.block(x, lambda y: self.attn(y, enc, l + ".encoder_attn", h, 0.0), l + ".encoder_attn_layer_norm")
            x = self.block(x, lambda y: self.lin(self.act(self.lin(y, l + ".fc1")), l + ".fc2"), l + ".final_layer_norm")
        if "model.decoder.layer_norm.weight" in self.w:
            x = self.ln(x, "model.decoder.layer_norm")
        return x[:, -1] @ self.p("lm_head.weight").T + self.p("final_logits_bias")[0]

    @torch.no_grad()
    def greedy(self, src, max_length, forced_eos, forced_bos=None):
        """One source, no padding: start token, argmax each step (forced_bos first when set, eos forced at the last when
        forced_eos), eos not kept."""
        enc = self.encode(torch.tensor([src]))
        out = [self.c["decoder_start_token_id"]]
        eos = self.c["eos_token_id"]
        for step in range(max_length):
            if forced_eos and step == max_length - 1:
                break
            tok = int(self.logits(enc, torch.tensor([out])).argmax()) if step or forced_bos is None else forced_bos
            if tok == eos:
                break
            out.append(tok)
        return out[1:]


def main():
    ckpt, sources, expected = sys.argv[1:4]
    n = int(sys.argv[4]) if len(sys.argv) > 4 else 20
    src = json.load(open(sources))["src_ids"][:n]
    exp = json.load(open(expected))
    ref = exp["ids"] if "ids" in exp else exp["greedy_ids"]
    # planc's plan (max length 64) forces eos at the last step as generate() does with forced_eos_token_id; the zoo's
    # greedy_ids take at most 32 new tokens without it
    max_length, forced = (exp.get("maxLength", 64), True) if "ids" in exp else (32, False)
    forced_bos = exp.get("conventions", {}).get("forced_bos_token_id")  # zoo bart, mbart
    m = Model(ckpt)
    same = 0
    for i, s in enumerate(src):
        got = m.greedy(s, max_length, forced, forced_bos)
        if got == ref[i]:
            same += 1
        else:
            print("sentence %d differs:\n  torch %s\n  ref   %s" % (i, got, ref[i]))
    print(json.dumps({"checkpoint": ckpt, "sentences": len(src), "identical": same}))


if __name__ == "__main__":
    main()
