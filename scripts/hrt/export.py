#!/usr/bin/python3
"""Exports a train.py checkpoint in the HRT model contract (docs/hrt.md) — or, for a --twin checkpoint, as an ordinary
Hugging Face seq2seq export (no position_ids, no decoder_nat_model.onnx, no "hrt" in config.json).

  /usr/bin/python3 scripts/hrt/export.py --ckpt .scratch/hrt/hrt/ckpt.pt --out .scratch/hrt/hrt-onnx
Files: encoder_model.onnx, decoder_model.onnx, decoder_with_past_model.onnx, [decoder_nat_model.onnx], weights.bin
(every initializer of 1 KB or more, each distinct tensor once, shared by the graphs), config.json,
generation_config.json, vocab.esen.spm (copied from --data). torch.onnx.export, opset 17 (Debian python3-torch 1.13)
and python3-onnx 1.12 (output shapes, shared weights, checker).
"""
import argparse
import json
import os
import shutil
import sys

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from model import ES_EN_DEFAULT, SPECIALS, VOCAB, Seq2Seq, causal_mask_add, pad_mask_add  # noqa: E402


OPSET = 17


class Encoder(nn.Module):
    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, input_ids, attention_mask):
        return self.m.encode(input_ids, attention_mask)


def default_positions(input_ids, past_len):
    t = input_ids.size(1)
    return (torch.arange(t, dtype=torch.int64)[None, :] + past_len).expand(input_ids.size(0), -1)


class Decoder(nn.Module):
    """decoder_model: causal over its input_ids (by sequence index); presents of self and cross attention."""

    def __init__(self, m, explicit_positions):
        super().__init__()
        self.m, self.explicit = m, explicit_positions

    def run(self, input_ids, position_ids, encoder_attention_mask, encoder_hidden_states):
        if position_ids is None:
            position_ids = default_positions(input_ids, 0)
        cross = self.m.cross_kv(encoder_hidden_states)
        h, presents = self.m.decode(input_ids, position_ids, causal_mask_add(input_ids.size(1)), cross,
                                    encoder_attention_mask)
        out = [self.m.logits(h)]
        for (k, v), (ck, cv) in zip(presents, cross):
            out += [k, v, ck, cv]
        return tuple(out)


class DecoderHrt(Decoder):
    def forward(self, input_ids, position_ids, encoder_attention_mask, encoder_hidden_states):
        return self.run(input_ids, position_ids, encoder_attention_mask, encoder_hidden_states)


class DecoderTwin(Decoder):
    def forward(self, input_ids, encoder_attention_mask, encoder_hidden_states):
        return self.run(input_ids, None, encoder_attention_mask, encoder_hidden_states)


class DecoderWithPast(nn.Module):
    """decoder_with_past_model: one new token per row attending to the cached self-attention keys and itself."""

    def __init__(self, m):
        super().__init__()
        self.m = m

    def run(self, input_ids, position_ids, encoder_attention_mask, past):
        n = len(self.m.dec)
        if position_ids is None:
            position_ids = default_positions(input_ids, past[0].size(2))
        self_past = [(past[4 * i], past[4 * i + 1]) for i in range(n)]
        cross = [(past[4 * i + 2], past[4 * i + 3]) for i in range(n)]
        h, presents = self.m.decode(input_ids, position_ids, None, cross, encoder_attention_mask, self_past)
        out = [self.m.logits(h)]
        for k, v in presents:
            out += [k, v]
        return tuple(out)


class DecoderWithPastHrt(DecoderWithPast):
    def forward(self, input_ids, position_ids, encoder_attention_mask, *past):
        return self.run(input_ids, position_ids, encoder_attention_mask, past)


class DecoderWithPastTwin(DecoderWithPast):
    def forward(self, input_ids, encoder_attention_mask, *past):
        return self.run(input_ids, None, encoder_attention_mask, past)


class DecoderNat(nn.Module):
    """decoder_nat_model: the same decoder without the causal mask (Skip-CMLM), keys masked by decoder_attention_mask."""

    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, input_ids, position_ids, decoder_attention_mask, encoder_attention_mask, encoder_hidden_states):
        cross = self.m.cross_kv(encoder_hidden_states)
        h, _ = self.m.decode(input_ids, position_ids, pad_mask_add(decoder_attention_mask), cross, encoder_attention_mask)
        return self.m.logits(h)


def export(module, args, names_in, names_out, axes, path, shapes=None):
    """torch.onnx.export; `shapes`: output name -> dims (int or symbol) written over what the exporter inferred
    (it loses the head count and head size through Reshape(..., -1)); needs python3-onnx."""
    with torch.no_grad():
        torch.onnx.export(module, args, path, input_names=names_in, output_names=names_out, dynamic_axes=axes,
                          opset_version=OPSET, do_constant_folding=True)
    if shapes:
        import onnx
        g = onnx.load(path)
        for o in g.graph.output:
            dims = shapes.get(o.name)
            if dims is None:
                continue
            o.type.tensor_type.shape.ClearField("dim")
            for d in dims:
                dim = o.type.tensor_type.shape.dim.add()
                if isinstance(d, int):
                    dim.dim_value = d
                else:
                    dim.dim_param = d
        onnx.save(g, path)
    print(f"wrote {path} ({os.path.getsize(path) / 1e6:.1f} MB)")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ckpt", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--data", default=ES_EN_DEFAULT, help="folder holding vocab.esen.spm")
    a = p.parse_args()
    torch.set_num_threads(1)
    state = torch.load(a.ckpt)
    t = state["args"]
    twin = t["twin"]
    m = Seq2Seq(t["d"], t["enc_layers"], t["dec_layers"], t["heads"], t["ffn"], 0.0, 0 if twin else len(SPECIALS))
    m.load_state_dict(state["model"])
    m.eval()
    os.makedirs(a.out, exist_ok=True)
    nl, h, dh = t["dec_layers"], t["heads"], t["d"] // t["heads"]
    B, S, T, P = 2, 5, 3, 4  # example sizes (all dynamic)
    ids = torch.tensor([[5, 6, 7, 8, 0], [9, 10, 0, 0, 0]])
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
    enc = m.encode(ids, mask).detach()
    b_ax = {0: "batch_size"}
    export(Encoder(m), (ids, mask), ["input_ids", "attention_mask"], ["last_hidden_state"],
           {"input_ids": {0: "batch_size", 1: "encoder_sequence_length"},
            "attention_mask": {0: "batch_size", 1: "encoder_sequence_length"},
            "last_hidden_state": {0: "batch_size", 1: "encoder_sequence_length"}},
           os.path.join(a.out, "encoder_model.onnx"), {"last_hidden_state": ["batch_size", "encoder_sequence_length", t["d"]]})

    dec_ids = torch.tensor([[0, 11, 12], [0, 13, 14]])
    dec_pos = torch.tensor([[0, 2, 4], [0, 2, 4]])
    enc_ax = {0: "batch_size", 1: "encoder_sequence_length"}
    presents = []
    for i in range(nl):
        presents += [f"present.{i}.decoder.key", f"present.{i}.decoder.value", f"present.{i}.encoder.key",
                     f"present.{i}.encoder.value"]
    axes = {"input_ids": {0: "batch_size", 1: "decoder_sequence_length"}, "encoder_attention_mask": enc_ax,
            "encoder_hidden_states": enc_ax, "logits": {0: "batch_size", 1: "decoder_sequence_length"}}
    for n in presents:
        axes[n] = {0: "batch_size", 2: "decoder_sequence_length" if ".decoder." in n else "encoder_sequence_length"}
    shapes = {"logits": ["batch_size", "decoder_sequence_length", VOCAB]}
    for n in presents:
        shapes[n] = ["batch_size", h, "decoder_sequence_length" if ".decoder." in n else "encoder_sequence_length", dh]
    if twin:
        export(DecoderTwin(m, False), (dec_ids, mask, enc), ["input_ids", "encoder_attention_mask", "encoder_hidden_states"],
               ["logits", *presents], axes, os.path.join(a.out, "decoder_model.onnx"), shapes)
    else:
        axes["position_ids"] = {0: "batch_size", 1: "decoder_sequence_length"}
        export(DecoderHrt(m, True), (dec_ids, dec_pos, mask, enc),
               ["input_ids", "position_ids", "encoder_attention_mask", "encoder_hidden_states"],
               ["logits", *presents], axes, os.path.join(a.out, "decoder_model.onnx"), shapes)

    past_names, past_vals, present_names = [], [], []
    for i in range(nl):
        for kind, ln in (("decoder", P), ("encoder", S)):
            for kv in ("key", "value"):
                past_names.append(f"past_key_values.{i}.{kind}.{kv}")
                past_vals.append(torch.randn(B, h, ln, dh))
        present_names += [f"present.{i}.decoder.key", f"present.{i}.decoder.value"]
    axes = {"input_ids": b_ax, "encoder_attention_mask": enc_ax, "logits": b_ax}
    for n in past_names:
        axes[n] = {0: "batch_size", 2: "past_decoder_sequence_length" if ".decoder." in n else "encoder_sequence_length"}
    for n in present_names:
        axes[n] = {0: "batch_size", 2: "past_decoder_sequence_length+1"}
    one = torch.tensor([[15], [16]])
    shapes = {"logits": ["batch_size", 1, VOCAB]}
    for n in present_names:
        shapes[n] = ["batch_size", h, "past_decoder_sequence_length+1", dh]
    if twin:
        export(DecoderWithPastTwin(m), (one, mask, *past_vals), ["input_ids", "encoder_attention_mask", *past_names],
               ["logits", *present_names], axes, os.path.join(a.out, "decoder_with_past_model.onnx"), shapes)
    else:
        axes["position_ids"] = b_ax
        export(DecoderWithPastHrt(m), (one, torch.tensor([[6], [6]]), mask, *past_vals),
               ["input_ids", "position_ids", "encoder_attention_mask", *past_names], ["logits", *present_names], axes,
               os.path.join(a.out, "decoder_with_past_model.onnx"), shapes)
        nat_ids = torch.tensor([[VOCAB + 2, 11, VOCAB + 2, 12], [VOCAB + 2, 13, 0, 0]])
        nat_pos = torch.tensor([[1, 2, 3, 4], [1, 2, 0, 0]])
        nat_mask = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0]])
        dax = {0: "batch_size", 1: "decoder_sequence_length"}
        export(DecoderNat(m), (nat_ids, nat_pos, nat_mask, mask, enc),
               ["input_ids", "position_ids", "decoder_attention_mask", "encoder_attention_mask", "encoder_hidden_states"],
               ["logits"], {"input_ids": dax, "position_ids": dax, "decoder_attention_mask": dax,
                            "encoder_attention_mask": enc_ax, "encoder_hidden_states": enc_ax, "logits": dax},
               os.path.join(a.out, "decoder_nat_model.onnx"), {"logits": ["batch_size", "decoder_sequence_length", VOCAB]})

    cfg = {
        "model_type": "marian", "architectures": ["MarianMTModel"], "vocab_size": VOCAB, "d_model": t["d"],
        "encoder_layers": t["enc_layers"], "decoder_layers": t["dec_layers"], "encoder_attention_heads": t["heads"],
        "decoder_attention_heads": t["heads"], "encoder_ffn_dim": t["ffn"], "decoder_ffn_dim": t["ffn"],
        "activation_function": "relu", "normalize_before": False, "scale_embedding": True,
        "max_position_embeddings": m.pos_table.size(0), "decoder_start_token_id": 0, "eos_token_id": 0,
        "pad_token_id": 0, "unk_token_id": 1, "forced_eos_token_id": 0,
    }
    if not twin:
        cfg["hrt"] = {
            "version": 1,
            "chunk_sizes": [k for k in (2, 3) if str(k) in t["chunk_sizes"].split(",")],
            "bos_k_ids": {"1": 0, "2": VOCAB + SPECIALS.index("bos_2"), "3": VOCAB + SPECIALS.index("bos_3")},
            "mask_id": VOCAB + SPECIALS.index("mask"),
            "input_vocab_size": VOCAB + len(SPECIALS),
            "nat_graph": "decoder_nat_model.onnx",
            "nat_positions": "1..m*k",
        }
    cfg["training"] = {"script": "scripts/hrt/train.py", "step": state["step"], "seed": t["seed"], "steps": t["steps"],
                       "twin": twin}
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    with open(os.path.join(a.out, "generation_config.json"), "w") as f:
        json.dump({"decoder_start_token_id": 0, "eos_token_id": 0, "pad_token_id": 0, "forced_eos_token_id": 0,
                   "num_beams": 1}, f, indent=2)
    shutil.copyfile(os.path.join(a.data, "vocab.esen.spm"), os.path.join(a.out, "vocab.esen.spm"))
    share_weights(a.out)
    import onnx
    for f in sorted(os.listdir(a.out)):
        if f.endswith(".onnx"):
            onnx.checker.check_model(os.path.join(a.out, f))
    print("onnx.checker: ok")


def share_weights(folder, min_bytes=1024):
    """Moves every initializer of >= min_bytes into one weights.bin, each distinct tensor once (as the es-en folder and
    planc's own exports lay out weights): the graphs then share the decoder's weights on disk too."""
    import hashlib

    import onnx
    path = os.path.join(folder, "weights.bin")
    seen, total = {}, 0
    with open(path + ".tmp", "wb") as out:
        for f in sorted(os.listdir(folder)):
            if not f.endswith(".onnx"):
                continue
            g = onnx.load(os.path.join(folder, f))
            for t in g.graph.initializer:
                if len(t.raw_data) < min_bytes:
                    continue
                key = hashlib.sha256(bytes([t.data_type]) + str(list(t.dims)).encode() + t.raw_data).hexdigest()
                if key not in seen:
                    pad = (-total) % 64
                    out.write(b"\0" * pad)
                    total += pad
                    seen[key] = (total, len(t.raw_data))
                    out.write(t.raw_data)
                    total += len(t.raw_data)
                off, n = seen[key]
                t.ClearField("raw_data")
                t.data_location = onnx.TensorProto.EXTERNAL
                del t.external_data[:]
                for k, v in (("location", "weights.bin"), ("offset", str(off)), ("length", str(n))):
                    e = t.external_data.add()
                    e.key, e.value = k, v
            onnx.save(g, os.path.join(folder, f))
    os.replace(path + ".tmp", path)
    print(f"wrote {path} ({total / 1e6:.1f} MB, {len(seen)} distinct tensors)")


if __name__ == "__main__":
    main()
