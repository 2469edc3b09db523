# The HRT / twin Transformer (docs/hrt.md): a Marian-style post-norm encoder-decoder whose decoder positions are
# explicit position ids, and whose decoder self-attention is causal (AT, Skip-AT) or bidirectional (CMLM, Skip-CMLM).
# Shared by train.py, export.py and decode.py; python3 + torch only (Debian python3-torch 1.13).
import math
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

# ../shared/models/es-en beside the repository (PLANC_SHARED overrides ../shared, as compiler/paths.ts does)
ES_EN_DEFAULT = os.path.join(os.environ.get("PLANC_SHARED") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "shared"), "models", "es-en")
NEG = torch.finfo(torch.float32).min  # additive mask value, as the Hugging Face Marian export
VOCAB = 32000  # the es-en SentencePiece vocabulary (= tokenizer ids; 0 = </s> = eos = pad = AT start, 1 = <unk>)
SPECIALS = ("bos_2", "bos_3", "mask")  # input-only ids appended after the tokenizer's: 32000, 32001, 32002
UNUSED_LOGIT = -1.0e4  # final_logits_bias of ids never seen as a training target (fp16-safe; exp() underflows to 0)


def sinusoids(n, d):
    """Marian's sinusoidal table: columns [0, d/2) sin, [d/2, d) cos of pos / 10000^(2j/d)."""
    pos = torch.arange(n, dtype=torch.float64)[:, None]
    j = torch.arange(d // 2, dtype=torch.float64)[None, :]
    ang = pos / torch.pow(10000.0, 2 * j / d)
    return torch.cat([torch.sin(ang), torch.cos(ang)], dim=1).float()


class Attention(nn.Module):
    def __init__(self, d, heads, dropout):
        super().__init__()
        self.h, self.dh, self.drop = heads, d // heads, dropout
        self.scaling = self.dh ** -0.5
        self.q_proj, self.k_proj, self.v_proj, self.out_proj = (nn.Linear(d, d) for _ in range(4))

    def split(self, x):  # [b, s, d] -> [b, h, s, dh]
        return x.view(x.size(0), -1, self.h, self.dh).transpose(1, 2)

    def kv(self, x):
        return self.split(self.k_proj(x)), self.split(self.v_proj(x))

    def forward(self, x, k, v, mask_add):
        q = self.split(self.q_proj(x) * self.scaling)
        w = torch.matmul(q, k.transpose(-1, -2))
        if mask_add is not None:
            w = w + mask_add
        w = F.dropout(torch.softmax(w, dim=-1), self.drop, self.training)
        o = torch.matmul(w, v).transpose(1, 2)
        return self.out_proj(o.reshape(o.size(0), -1, self.h * self.dh))


class FFN(nn.Module):
    def __init__(self, d, ffn, dropout):
        super().__init__()
        self.fc1, self.fc2, self.drop = nn.Linear(d, ffn), nn.Linear(ffn, d), dropout

    def forward(self, x):
        return self.fc2(F.dropout(F.relu(self.fc1(x)), self.drop, self.training))


class EncoderLayer(nn.Module):
    def __init__(self, d, heads, ffn, dropout):
        super().__init__()
        self.self_attn, self.ffn = Attention(d, heads, dropout), FFN(d, ffn, dropout)
        self.ln1, self.ln2, self.drop = nn.LayerNorm(d), nn.LayerNorm(d), dropout

    def forward(self, x, mask_add):
        k, v = self.self_attn.kv(x)
        x = self.ln1(x + F.dropout(self.self_attn(x, k, v, mask_add), self.drop, self.training))
        return self.ln2(x + F.dropout(self.ffn(x), self.drop, self.training))


class DecoderLayer(nn.Module):
    def __init__(self, d, heads, ffn, dropout):
        super().__init__()
        self.self_attn, self.cross_attn = Attention(d, heads, dropout), Attention(d, heads, dropout)
        self.ffn = FFN(d, ffn, dropout)
        self.ln1, self.ln2, self.ln3, self.drop = nn.LayerNorm(d), nn.LayerNorm(d), nn.LayerNorm(d), dropout

    def forward(self, x, self_mask, cross_k, cross_v, cross_mask, past=None):
        k, v = self.self_attn.kv(x)
        if past is not None:
            k, v = torch.cat([past[0], k], dim=2), torch.cat([past[1], v], dim=2)
        x = self.ln1(x + F.dropout(self.self_attn(x, k, v, self_mask), self.drop, self.training))
        x = self.ln2(x + F.dropout(self.cross_attn(x, cross_k, cross_v, cross_mask), self.drop, self.training))
        return self.ln3(x + F.dropout(self.ffn(x), self.drop, self.training)), (k, v)


def pad_mask_add(mask):
    """[b, t] int (1 = real) -> additive [b, 1, 1, t]."""
    return (1.0 - mask[:, None, None, :].to(torch.float32)) * NEG


def causal_mask_add(t, device=None):
    """[t, t] additive: query i sees keys 0..i (by sequence index)."""
    return torch.triu(torch.full((t, t), NEG, device=device), diagonal=1)


class Seq2Seq(nn.Module):
    """n_special = 3 for HRT (bos_2, bos_3, mask input rows), 0 for the autoregressive twin."""

    def __init__(self, d=256, enc_layers=3, dec_layers=2, heads=4, ffn=1024, dropout=0.1, n_special=3, max_pos=1024):
        super().__init__()
        self.d, self.n_special = d, n_special
        self.embed = nn.Embedding(VOCAB + n_special, d)
        nn.init.normal_(self.embed.weight, 0.0, d ** -0.5)
        self.register_buffer("pos_table", sinusoids(max_pos, d), persistent=False)
        self.enc = nn.ModuleList(EncoderLayer(d, heads, ffn, dropout) for _ in range(enc_layers))
        self.dec = nn.ModuleList(DecoderLayer(d, heads, ffn, dropout) for _ in range(dec_layers))
        # bias of the tokenizer-vocabulary logits: 0 for training-target ids, UNUSED_LOGIT for the rest (set by train.py)
        self.register_buffer("final_logits_bias", torch.zeros(VOCAB))
        self.drop = dropout
        self.scale = math.sqrt(d)

    def embed_at(self, ids, pos):
        x = self.embed(ids) * self.scale + F.embedding(pos, self.pos_table)
        return F.dropout(x, self.drop, self.training)

    def encode(self, ids, mask):
        pos = torch.arange(ids.size(1), device=ids.device)[None, :].expand(ids.size(0), -1)
        x, m = self.embed_at(ids, pos), pad_mask_add(mask)
        for layer in self.enc:
            x = layer(x, m)
        return x

    def cross_kv(self, enc_out):
        return [layer.cross_attn.kv(enc_out) for layer in self.dec]

    def decode(self, ids, pos, self_mask, cross, enc_mask, past=None):
        """Hidden states [b, t, d] and each layer's self-attention (k, v) including past."""
        x, cm = self.embed_at(ids, pos), pad_mask_add(enc_mask)
        presents = []
        for i, layer in enumerate(self.dec):
            x, kv = layer(x, self_mask, cross[i][0], cross[i][1], cm, None if past is None else past[i])
            presents.append(kv)
        return x, presents

    def logits(self, h, rows=None):
        """Logits over the tokenizer vocabulary (tied embedding) + final_logits_bias; `rows`: only those ids (training)."""
        if rows is None:
            return torch.matmul(h, self.embed.weight[:VOCAB].t()) + self.final_logits_bias
        return torch.matmul(h, self.embed.weight[rows].t())
