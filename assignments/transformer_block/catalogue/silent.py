"""Silent mistakes: code whose return values are right on the inputs a careless suite would use, wrong only
in what the notebook also asks.  Three classes, several entries each, so that check-suite measures the class
and not one bug:

* refused arguments accepted: an argument the notebook says to refuse (batch_dependence's unknown kind) is
  answered with a number, through a fallback or a loose comparison;
* inputs left alone, changed: a function that takes the caller's modules (layer_grad_norms' blocks,
  permutation_error's module) freezes them, switches them to eval mode or casts them, or changes the caller's
  tensors (in place, requires_grad_), and still returns the right numbers; a module's forward that changes the
  tensors it is given in place (LayerNorm centring x, the attention inverting the padding mask, the block adding
  a residual with +=) and still returns the right output;
* an algorithm's look-alikes: a function the notebook defines by an algorithm (ideal_head_weights' round robin
  dealing) replaced by another with the same stated properties (the same guaranteed share).
"""
from __future__ import annotations

from autograder.authoring.catalogue import Entry, M

BATCH = "batch_dependence"
PLACE = "norm_placement"
ORDER = "order_blindness"
SHARE = "head_share"
NORM = "layer_norm"
MHA = "multi_head_attention"
BLOCK = "transformer_block"

_KIND_CHECK = ("if kind not in normalisers:\n"
               "        raise ValueError(f\"kind must be 'layer' or 'batch', not {kind!r}\")\n    ")
_PICK = "normalise = normalisers[kind]"
_GRAD_START = "h = x.detach().requires_grad_()"
_PERM_FIRST = "permuted_first = module(x[:, perm], causal=causal)"
_DEAL = "weights[i % num_heads, target] = 1.0"
_IDLE = "row.fill_(1.0)"

REFUSED_ACCEPTED: list[Entry] = [
    Entry("bd-unknown-kind-falls-back", "an unknown kind falls back to batch norm (dict.get with a default)", BATCH,
          (M(_KIND_CHECK, ""), M(_PICK, "normalise = normalisers.get(kind, batch_normalise)")), hint="ValueError"),
    Entry("bd-kind-else-layer", "every kind but \"batch\" is taken as layer norm (an else branch)", BATCH,
          (M(_KIND_CHECK, ""), M(_PICK, "normalise = normalisers[\"batch\" if kind == \"batch\" else \"layer\"]")),
          hint="ValueError"),
    Entry("bd-kind-case-folded", "the kind is lower-cased first, so \"Layer\" and \"BATCH\" are accepted", BATCH,
          (M("if kind not in normalisers:", "kind = kind.lower()\n    if kind not in normalisers:"),),
          hint="ValueError"),
    Entry("bd-kind-stripped", "the kind is stripped of spaces first, so \"layer \" is accepted", BATCH,
          (M("if kind not in normalisers:", "kind = kind.strip()\n    if kind not in normalisers:"),),
          hint="ValueError"),
]

INPUTS_CHANGED: list[Entry] = [
    Entry("np-blocks-frozen", "layer_grad_norms freezes every block (requires_grad_(False)): only the input's "
          "gradient is needed", PLACE,
          (M(_GRAD_START, "for block in blocks:\n        block.requires_grad_(False)\n    " + _GRAD_START),),
          hint="requires_grad"),
    Entry("np-blocks-eval", "layer_grad_norms switches every block to eval mode first", PLACE,
          (M(_GRAD_START, "for block in blocks:\n        block.eval()\n    " + _GRAD_START),),
          hint="training mode"),
    Entry("np-blocks-float64", "layer_grad_norms casts the blocks and x to float64 for accuracy", PLACE,
          (M(_GRAD_START, "for block in blocks:\n        block.double()\n    h = x.detach().double().requires_grad_()"),
           M("loss = (h * target).sum()", "loss = (h * target.double()).sum()")),
          hint="changed from torch.float32"),
    Entry("ob-module-frozen", "permutation_error freezes the module: no gradient is needed", ORDER,
          (M(_PERM_FIRST, "module.requires_grad_(False)\n    " + _PERM_FIRST),), hint="requires_grad"),
    Entry("ob-module-eval", "permutation_error switches the module to eval mode", ORDER,
          (M(_PERM_FIRST, "module.eval()\n    " + _PERM_FIRST),), hint="training mode"),
    # the caller's tensors
    Entry("np-x-requires-grad-in-place", "layer_grad_norms sets requires_grad on the caller's x instead of a copy",
          PLACE, (M(_GRAD_START, "h = x.requires_grad_()"),), hint="requires_grad went from False to True"),
    Entry("bd-batch-normalise-in-place", "batch_normalise centres x in place (x -= mean)", BATCH,
          (M("return (x - mean) / (var + eps).sqrt()", "x -= mean\n    return x / (var + eps).sqrt()"),),
          hint="changed its argument 1"),
    Entry("gs-other-columns-zeroed-in-place", "guaranteed_share zeroes the caller's non-target columns first",
          SHARE, (M("return weights[:, targets].max(dim=0).values.min().item()",
                    "weights[:, [c for c in range(weights.shape[-1]) if c not in targets]] = 0.0\n"
                    "    return weights[:, targets].max(dim=0).values.min().item()"),),
          hint="changed its argument 1"),
    # what a module's forward is given
    Entry("ln-module-centres-x-in-place", "LayerNorm's forward centres its input in place (x -= mean) before "
          "layer_norm, which a shift does not change", NORM,
          (M("        return layer_norm(x, self.weight, self.bias, self.eps)",
             "        x -= x.mean(dim=-1, keepdim=True)\n        return layer_norm(x, self.weight, self.bias, self.eps)"),),
          hint="changed its input x in place"),
    Entry("mha-padding-mask-inverted-in-place", "MultiHeadAttention inverts key_padding_mask in place "
          "(logical_not_) to get the keys kept", MHA,
          (M("keys_kept = ~key_padding_mask[:, None, None, :]",
             "keys_kept = key_padding_mask.logical_not_()[:, None, None, :]"),),
          hint="changed its input key_padding_mask in place"),
    Entry("block-pre-norm-residual-in-place", "the pre-norm block adds the attention's residual in place "
          "(x += self.attn(self.ln1(x)))", BLOCK,
          (M("x = x + self.attn(self.ln1(x), causal=causal)", "x += self.attn(self.ln1(x), causal=causal)"),),
          hint="changed its input x in place"),
    Entry("block-post-norm-residual-in-place", "the post-norm block adds the attention's residual in place "
          "before its norm (x += self.attn(x); x = self.ln1(x))", BLOCK,
          (M("x = self.ln1(x + self.attn(x, causal=causal))",
             "x += self.attn(x, causal=causal)\n        x = self.ln1(x)"),),
          hint="changed its input x in place"),
]

LOOK_ALIKES: list[Entry] = [
    Entry("hs-contiguous-blocks", "targets dealt in contiguous blocks of ceil(k/h): the same share, not round "
          "robin", SHARE, (M(_DEAL, "weights[i // -(-len(targets) // num_heads), target] = 1.0"),),
          hint="contiguous blocks"),
    Entry("hs-sorted-round-robin", "round robin over the sorted targets instead of the list's order", SHARE,
          (M("for i, target in enumerate(targets):", "for i, target in enumerate(sorted(targets)):"),),
          hint="sorted targets"),
    Entry("hs-idle-head-on-one-position", "a head without a target puts all its weight on position 0", SHARE,
          (M(_IDLE, "row[0] = 1.0"),), hint="uniform over all seq_len positions"),
    Entry("hs-idle-head-on-the-targets", "a head without a target spreads itself over all the targets", SHARE,
          (M(_IDLE, "row[targets] = 1.0"),), hint=None),
]

SILENT: list[Entry] = REFUSED_ACCEPTED + INPUTS_CHANGED + LOOK_ALIKES
