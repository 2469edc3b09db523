# Assembles the .npy tensors bench/ct2/hf-checkpoint.ts wrote into OUT/pytorch_model.bin (torch.save of the state dict).
import json
import os
import sys

import numpy as np
import torch


def load_state(out):
    """The state dict from OUT/tensors (index.json and one .npy per tensor)."""
    index = json.load(open(os.path.join(out, "tensors", "index.json")))
    state = {}
    for t in index:
        a = np.load(os.path.join(out, "tensors", t["name"] + ".npy"))
        if list(a.shape) != list(t["shape"]):
            raise ValueError("%s: shape %s, index says %s" % (t["name"], a.shape, t["shape"]))
        state[t["name"]] = torch.from_numpy(a)
    return state


def assemble(out):
    state = load_state(out)
    torch.save(state, os.path.join(out, "pytorch_model.bin"))
    return state


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python3 bench/ct2/assemble.py CHECKPOINT_DIR")
    s = assemble(sys.argv[1])
    print("wrote %s (%d tensors)" % (os.path.join(sys.argv[1], "pytorch_model.bin"), len(s)))
