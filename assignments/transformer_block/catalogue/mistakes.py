"""Known mistakes: each entry is the reference with ONE realistic bug (sometimes spread over two lines), the
part in which it must lose points and, where the suite can recognise it from outputs alone, the hint text
the student must see.  See the package docstring for the format."""
from __future__ import annotations

from autograder.authoring.catalogue import Entry, EveryPart, M, release_cells

LN = "layer_norm"
ATT = "attention"
MHA = "multi_head_attention"
BLOCK = "transformer_block"
GRAD = "gradient_experiment"
BATCH = "batch_dependence"
COUNT = "parameter_count"
PLACE = "norm_placement"
MASKDEP = "mask_dependence"
SHARE = "head_share"
ORDER = "order_blindness"

_LN_MEAN = "mean = x.mean(dim=-1, keepdim=True)"
_LN_VAR = "var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)  # biased, as torch.nn.LayerNorm"
_LN_OUT = "return (x - mean) / torch.sqrt(var + eps) * weight + bias"
_SCORES = "scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])"
_FILL = 'scores = scores.masked_fill(~mask, float("-inf"))'
_SOFTMAX = "weights = torch.softmax(scores, dim=-1)"
_NOTHING_ZERO = "return weights if mask is None else weights.masked_fill(~mask, 0.0)"
_TRIL = "return torch.ones(seq_len, seq_len, dtype=torch.bool, device=device).tril()"
_SPLIT = "return x.view(batch, seq_len, self.num_heads, self.d_head).transpose(1, 2)"
_MERGE = "return self.Wo(heads.transpose(1, 2).reshape(batch, seq_len, d_model))"
_SDPA_CALL = "heads = scaled_dot_product_attention(q, k, v, mask)"
_MASK_LINE = "mask = causal_mask(seq_len, device=x.device) if causal else None"
_KEYS_KEPT = "keys_kept = ~key_padding_mask[:, None, None, :]"
_COMBINE = "mask = keys_kept if mask is None else mask & keys_kept"
_PADDING = ("if key_padding_mask is not None:\n"
            "            # [B, S], True = padding  ->  [B, 1, 1, S], True = may attend: the same for every head and query\n"
            f"            {_KEYS_KEPT}\n            {_COMBINE}")
_PRE_ATTN = "x = x + self.attn(self.ln1(x), causal=causal)"
_PRE_FFN = "return x + self.ffn(self.ln2(x))"
_POST_ATTN = "x = self.ln1(x + self.attn(x, causal=causal))"
_POST_FFN = "return self.ln2(x + self.ffn(x))"
_FFN = "self.ffn = nn.Sequential(nn.Linear(d_model, d_ff), nn.ReLU(), nn.Linear(d_ff, d_model))"
_SEED = "torch.manual_seed(seed)\n"
_LAYERS = "layers = [nn.Linear(d_model, d_model) for _ in range(n_layers)]\n"
_X = "x = torch.randn(1, d_model, requires_grad=True)\n"
_UPDATE = "update = torch.tanh(layer(h))"
_RESIDUAL = "h = h + update if residual else update"
_BACKWARD = "h.sum().backward()"
_RETURN_NORM = "return x.grad.norm().item()"
_TODO = "raise NotImplementedError()"
_SLOPE = "slope = (attend(x + nudge) - attend(x - nudge)) / (2 * eps)"
_KEEP = "table[:, j] = torch.maximum(table[:, j], slope.abs().amax(dim=-1))"
_DEAL = "weights[i % num_heads, target] = 1.0"
_SHARE = "return weights[:, targets].max(dim=0).values.min().item()"
_FIRST = "permuted_first = module(x[:, perm], causal=causal)"
_AFTER = "permuted_after = module(x, causal=causal)[:, perm]"
# the bodies of every forward (and of the split_heads helper), for "constructors only"
_FORWARDS = ("return layer_norm(x, self.weight, self.bias, self.eps)",
             "batch, seq_len, _ = x.shape\n        " + _SPLIT,
             "\n        ".join(("batch, seq_len, d_model = x.shape",
                                "q, k, v = self.split_heads(self.Wq(x)), self.split_heads(self.Wk(x)), "
                                "self.split_heads(self.Wv(x))", _MASK_LINE, _PADDING, _SDPA_CALL, _MERGE)),
             "if self.norm_first:\n            " + _PRE_ATTN + "\n            " + _PRE_FFN + "\n        "
             + _POST_ATTN + "\n        " + _POST_FFN)
_FUNCTION_CELLS = ("layer_norm_function", "causal_mask_function", "attention_functions", "input_grad_norm_function",
                   "batch_dependence_functions", "parameter_count_function", "layer_grad_norms_function",
                   "mask_dependence_function", "head_share_functions", "order_blindness_function")
_BN_MEAN = "mean = x.mean(dim=0, keepdim=True)"
_BN_VAR = "var = ((x - mean) ** 2).mean(dim=0, keepdim=True)"
_OTHERS = "others = torch.randn(batch_size - 1, d_model)"
_NEW_BATCH = "y = torch.cat([x[:1], others])"
_ATTN_COUNT = "attention = 4 * (d_model * d_model + d_model)"
_FFN_COUNT = "ffn = (d_model * d_ff + d_ff) + (d_ff * d_model + d_model)"
_NORM_COUNT = "norms = 2 * (d_model + d_model)"
_NORMS_RETURN = "return [g.norm().item() for g in grads]"
# layer_grad_norms returning something other than the gradient at each block's input
_PARAMETER_GRADS = '''
def layer_grad_norms(blocks, x, target):
    h = x
    for block in blocks:
        h = block(h)
    loss = (h * target).sum()
    norms = []
    for block in blocks:
        params = list(block.parameters())
        grads = torch.autograd.grad(loss, params, retain_graph=True)
        norms.append(torch.cat([g.flatten() for g in grads]).norm().item())
    return norms
'''
_OUTPUT_NORMS = '''
def layer_grad_norms(blocks, x, target):
    norms, h = [], x
    for block in blocks:
        h = block(h)
        norms.append(h.norm().item())
    return norms
'''

MISTAKES: list[Entry] = [
    # --- layer_norm ----------------------------------------------------------------------------------------
    Entry("ln-unbiased-variance", "torch's default x.var() divides by d - 1", LN,
          (M(_LN_VAR, "var = x.var(dim=-1, keepdim=True)"),), hint="unbiased variance"),
    Entry("ln-eps-outside-sqrt", "(x - mean) / (sqrt(var) + eps)", LN,
          (M("torch.sqrt(var + eps)", "(torch.sqrt(var) + eps)"),), hint="eps belongs inside the square root"),
    Entry("ln-missing-keepdim", "mean and variance without keepdim=True (right shape only when seq_len == "
          "d_model)", LN,
          (M(_LN_MEAN, "mean = x.mean(dim=-1)"), M(_LN_VAR, "var = ((x - mean) ** 2).mean(dim=-1)")),
          hint="keepdim=True"),
    Entry("ln-ignores-eps-argument", "a hard-coded 1e-5 instead of the eps argument", LN,
          (M("torch.sqrt(var + eps)", "torch.sqrt(var + 1e-5)"),), hint="use the eps argument"),
    Entry("ln-no-eps", "no eps at all", LN, (M("torch.sqrt(var + eps)", "torch.sqrt(var)"),),
          hint="layer norm without eps"),
    Entry("ln-naive-variance", "variance as E[x^2] - E[x]^2 (catastrophic cancellation in float32)", LN,
          (M(_LN_VAR, "var = (x * x).mean(dim=-1, keepdim=True) - mean ** 2"),), hint="cancels catastrophically"),
    Entry("ln-normalises-dim-minus-2", "statistics over dim=-2 (the positions)", LN,
          (M(_LN_MEAN, "mean = x.mean(dim=-2, keepdim=True)"),
           M(_LN_VAR, "var = ((x - mean) ** 2).mean(dim=-2, keepdim=True)")), hint="dimension -2"),
    Entry("ln-no-affine", "weight and bias never applied", LN,
          (M(_LN_OUT, "return (x - mean) / torch.sqrt(var + eps)"),), hint="without the affine step"),
    Entry("ln-weight-bias-swapped", "* bias + weight", LN,
          (M("torch.sqrt(var + eps) * weight + bias", "torch.sqrt(var + eps) * bias + weight"),),
          hint="weight and bias swapped"),
    Entry("ln-sqrt-of-std", "divides by sqrt(std + eps)", LN,
          (M("torch.sqrt(var + eps)", "torch.sqrt(torch.sqrt(var) + eps)"),), hint="square root of the variance"),
    Entry("LayerNorm-default-eps-1e-6", "LayerNorm's default eps is 1e-6", LN,
          (M("def __init__(self, d_model: int, eps: float = 1e-5)",
             "def __init__(self, d_model: int, eps: float = 1e-6)"),),
          hint="the default must be 1e-5"),
    Entry("LayerNorm-ignores-eps", "LayerNorm.forward does not pass self.eps", LN,
          (M("return layer_norm(x, self.weight, self.bias, self.eps)",
             "return layer_norm(x, self.weight, self.bias)"),),
          hint="use the eps passed to the constructor"),
    Entry("LayerNorm-plain-tensors", "weight and bias as plain tensors (not registered as parameters)", LN,
          (M("self.weight = nn.Parameter(torch.ones(d_model))", "self.weight = torch.ones(d_model)"),
           M("self.bias = nn.Parameter(torch.zeros(d_model))", "self.bias = torch.zeros(d_model)")),
          hint="nn.Parameter"),
    Entry("LayerNorm-random-init", "weight initialised randomly instead of to ones", LN,
          (M("self.weight = nn.Parameter(torch.ones(d_model))", "self.weight = nn.Parameter(torch.randn(d_model))"),),
          hint="must be initialised to ones"),
    Entry("LayerNorm-gamma-beta", "parameters named gamma and beta (torch.nn.LayerNorm's are weight and bias): "
          "nothing loads into them by name, so the block is judged on the weights its own LayerNorms hold", LN,
          (M("self.weight = nn.Parameter(torch.ones(d_model))", "self.gamma = nn.Parameter(torch.ones(d_model))"),
           M("self.bias = nn.Parameter(torch.zeros(d_model))", "self.beta = nn.Parameter(torch.zeros(d_model))"),
           M("return layer_norm(x, self.weight, self.bias, self.eps)",
             "return layer_norm(x, self.gamma, self.beta, self.eps)"))),
    # --- attention -----------------------------------------------------------------------------------------
    Entry("att-no-scaling", "softmax(q k^T) without 1/sqrt(d_k)", ATT,
          (M(_SCORES, "scores = q @ k.transpose(-2, -1)"),), hint="without scaling"),
    Entry("att-scale-by-d_k", "scores / d_k", ATT,
          (M(_SCORES, "scores = q @ k.transpose(-2, -1) / q.shape[-1]"),), hint="1 / d_k"),
    Entry("att-softmax-over-queries", "softmax over dim=-2", ATT,
          (M(_SOFTMAX, "weights = torch.softmax(scores, dim=-2)"),), hint="over dimension -2"),
    Entry("att-transposes-q-not-k", "k @ q^T instead of q @ k^T", ATT,
          (M(_SCORES, "scores = k @ q.transpose(-2, -1) / math.sqrt(q.shape[-1])"),), hint="transposed scores"),
    Entry("att-inverted-mask-convention", "True = blocked, consistently in causal_mask and attention_weights", ATT,
          (M(_FILL, 'scores = scores.masked_fill(mask, float("-inf"))'),
           M(_TRIL, "return torch.ones(seq_len, seq_len, dtype=torch.bool, device=device).triu(1)")),
          hint="opposite"),
    Entry("att-strictly-lower-mask", "causal mask without the diagonal (j < i)", ATT,
          (M(_TRIL, "return torch.ones(seq_len, seq_len, dtype=torch.bool, device=device).tril(-1)"),),
          hint="excludes the diagonal"),
    Entry("att-transposed-causal-mask", "causal mask True where j >= i", ATT,
          (M(_TRIL, "return torch.ones(seq_len, seq_len, dtype=torch.bool, device=device).triu()"),),
          hint="transposed"),
    Entry("att-naive-softmax", "exp(scores) / sum without subtracting the row maximum: overflows", ATT,
          (M(_SOFTMAX, "e = torch.exp(scores)\n    weights = e / e.sum(dim=-1, keepdim=True)"),),
          hint="subtract the row maximum"),
    Entry("att-mask-after-softmax", "softmax first, then zero the blocked weights", ATT,
          (M(_FILL, "pass"),), hint="after the softmax"),
    Entry("att-mask-fills-zero", "blocked scores set to 0 instead of -inf", ATT,
          (M(_FILL, "scores = scores.masked_fill(~mask, 0.0)"),), hint="filling the blocked scores with 0"),
    Entry("att-sdpa-drops-mask", "scaled_dot_product_attention does not pass the mask on", ATT,
          (M("return attention_weights(q, k, mask) @ v", "return attention_weights(q, k) @ v"),),
          hint="ignoring the mask"),
    Entry("att-fully-masked-nan", "a query whose keys are all masked left as softmax's 0/0 = NaN", ATT,
          (M(_NOTHING_ZERO, "return weights"),), hint="0/0 = NaN"),
    Entry("att-fill-minus-1e9", "the Annotated Transformer's masked_fill(mask == 0, -1e9) and nothing more: a "
          "query whose keys are all masked gets uniform weights instead of 0", ATT,
          (M(_FILL, "scores = scores.masked_fill(mask == 0, -1e9)"), M(_NOTHING_ZERO, "return weights")),
          hint="uniform (1/S_k)"),
    Entry("att-additive-mask-nan-gradients", "an additive -inf mask and nan_to_num after the softmax: the weights "
          "are right, but back-propagating a fully-masked row gives NaN gradients", ATT,
          (M(_FILL, "scores = scores + torch.zeros_like(scores).masked_fill(~mask, float(\"-inf\"))"),
           M(_NOTHING_ZERO, "return weights.nan_to_num(0.0)")), hint="NaN gradients"),
    Entry("att-float-mask", "causal_mask returns a float 0/1 mask (the student's attention accepts it; "
          "never numerically wrong)", ATT,
          (M(_TRIL, "return torch.ones(seq_len, seq_len, device=device).tril()"),
           M(_FILL, 'scores = scores.masked_fill(mask == 0, float("-inf"))')),
          hint="torch.bool"),
    Entry("att-float-mask-everywhere", "causal_mask returns a float 0/1 mask that the student's attention reads "
          "as mask == 0 throughout: right on its own, but MultiHeadAttention's mask & keys_kept raises on it, so "
          "the causal padded settings cannot be judged on the student's own attention", ATT,
          (M(_TRIL, "return torch.ones(seq_len, seq_len, device=device).tril()"),
           M(_FILL, 'scores = scores.masked_fill(mask == 0, float("-inf"))'),
           M(_NOTHING_ZERO, "return weights if mask is None else weights.masked_fill(mask == 0, 0.0)")),
          hint="torch.bool"),
    # --- multi_head_attention ------------------------------------------------------------------------------
    Entry("mha-heads-view-without-transpose", "heads split with view(B, H, S, d_head): mixes positions (and "
          "leaks the future under the causal mask)", MHA,
          (M(_SPLIT, "return x.view(batch, self.num_heads, seq_len, self.d_head)"),), hint=".view("),
    Entry("mha-merge-without-transpose", "heads merged with reshape(B, S, d_model) straight from [B, H, S, d]",
          MHA, (M(_MERGE, "return self.Wo(heads.reshape(batch, seq_len, d_model))"),),
          hint="merging the heads without transposing back"),
    Entry("mha-merge-wrong-order", "heads concatenated feature-major ([B, S, d_head, H])", MHA,
          (M(_MERGE, "return self.Wo(heads.permute(0, 2, 3, 1).reshape(batch, seq_len, d_model))"),),
          hint="concatenating the heads in the wrong order"),
    Entry("mha-scale-by-d_model", "scores scaled by 1/sqrt(d_model) instead of 1/sqrt(d_head)", MHA,
          (M(_SDPA_CALL, "scores = q @ k.transpose(-2, -1) / math.sqrt(d_model)\n"
                         "        if mask is not None:\n"
                         '            scores = scores.masked_fill(~mask, float("-inf"))\n'
                         "        heads = torch.softmax(scores, dim=-1) @ v"),), hint="1/sqrt(d_head)"),
    Entry("mha-no-output-projection", "Wo never applied", MHA,
          (M(_MERGE, "return heads.transpose(1, 2).reshape(batch, seq_len, d_model)"),),
          hint="without the output projection Wo"),
    Entry("mha-Wk-for-values", "copy-paste slip: values projected with Wk", MHA,
          (M("self.split_heads(self.Wv(x))", "self.split_heads(self.Wk(x))"),), hint="values projected with Wk"),
    Entry("mha-forward-computes-nothing", "the right parameters and output shape, but forward is only Wo(x)", MHA,
          (M(_FORWARDS[2], "return self.Wo(x)"),), hint="structure and form alone earn no points"),
    Entry("mha-ignores-causal", "causal flag ignored: never masks", MHA,
          (M(_MASK_LINE, "mask = None"),), hint="WITHOUT the causal mask"),
    Entry("mha-padding-on-queries", "key_padding_mask put on the query axis, [B, 1, S, 1]: it hides padded queries, "
          "not padded keys", MHA,
          (M(_KEYS_KEPT, "keys_kept = ~key_padding_mask[:, None, :, None]"),), hint="masking padded QUERIES"),
    Entry("mha-padding-inverted", "key_padding_mask used as a may-attend mask (True taken as keep)", MHA,
          (M(_KEYS_KEPT, "keys_kept = key_padding_mask[:, None, None, :]"),), hint="inverted padding mask"),
    Entry("mha-padding-dropped-when-causal", "with causal=True only the causal mask is applied: the padding mask is "
          "built but never combined with it", MHA,
          (M(_COMBINE, "mask = keys_kept if mask is None else mask"),), hint="the causal mask alone"),
    Entry("mha-assertion-error", "assert instead of raising ValueError for indivisible heads", MHA,
          (M("if d_model % num_heads != 0:\n"
             '            raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")',
             'assert d_model % num_heads == 0, "d_model must be divisible by num_heads"'),),
          hint="raised AssertionError"),
    Entry("mha-ignores-bias-flag", "nn.Linear(d_model, d_model) whatever bias says", MHA,
          (M("nn.Linear(d_model, d_model, bias=bias)", "nn.Linear(d_model, d_model)", count=4),),
          hint="Pass bias=bias"),
    Entry("mha-python-list-of-linears", "projections kept in a plain Python list (not registered)", MHA,
          (M("self.Wq = nn.Linear(d_model, d_model, bias=bias)\n"
             "        self.Wk = nn.Linear(d_model, d_model, bias=bias)\n"
             "        self.Wv = nn.Linear(d_model, d_model, bias=bias)\n"
             "        self.Wo = nn.Linear(d_model, d_model, bias=bias)",
             "self.proj = [nn.Linear(d_model, d_model, bias=bias) for _ in range(4)]"),
           M("self.split_heads(self.Wq(x)), self.split_heads(self.Wk(x)), self.split_heads(self.Wv(x))",
             "(self.split_heads(p(x)) for p in self.proj[:3])"),
           M("return self.Wo(", "return self.proj[3](")),
          hint="nn.ModuleList"),

    # --- transformer_block ---------------------------------------------------------------------------------
    Entry("block-pre-norm-residual-from-normalised", "pre-norm residual taken from the normalised input", BLOCK,
          (M(_PRE_ATTN, "x = self.ln1(x) + self.attn(self.ln1(x), causal=causal)"),
           M(_PRE_FFN, "return self.ln2(x) + self.ffn(self.ln2(x))")),
          hint="residual starts from the normalised input"),
    Entry("block-one-layernorm-shared", "ln2 is the same module as ln1 (invisible with ones/zeros weights)", BLOCK,
          (M("self.ln2 = LayerNorm(d_model)", "self.ln2 = self.ln1"),), hint="share one module"),
    Entry("block-ln1-used-twice", "forward uses ln1 for both sublayers", BLOCK,
          (M(_PRE_FFN, "return x + self.ffn(self.ln1(x))"), M(_POST_FFN, "return self.ln1(x + self.ffn(x))")),
          hint="uses ln1 for both sublayers"),
    Entry("block-ln1-ln2-swapped", "ln2 around attention, ln1 around the feed-forward", BLOCK,
          (M(_PRE_ATTN, "x = x + self.attn(self.ln2(x), causal=causal)"),
           M(_PRE_FFN, "return x + self.ffn(self.ln1(x))"),
           M(_POST_ATTN, "x = self.ln2(x + self.attn(x, causal=causal))"),
           M(_POST_FFN, "return self.ln1(x + self.ffn(x))")), hint="ln1 and ln2 swapped"),
    Entry("block-no-attention-residual", "post-norm without the residual around attention", BLOCK,
          (M(_POST_ATTN, "x = self.ln1(self.attn(x, causal=causal))"),),
          hint="without the residual connection around the attention"),
    Entry("block-no-ffn-residual", "pre-norm without the residual around the feed-forward", BLOCK,
          (M(_PRE_FFN, "return self.ffn(self.ln2(x))"),),
          hint="without the residual connection around the feed-forward"),
    Entry("block-norm-orders-swapped", "if not self.norm_first: pre-norm and post-norm swapped", BLOCK,
          (M("if self.norm_first:", "if not self.norm_first:"),), hint="but norm_first="),
    Entry("block-ignores-norm-first", "always post-norm", BLOCK,
          (M("self.norm_first = norm_first", "self.norm_first = False"),), hint="post-norm block"),
    Entry("block-post-norm-inside-residual", "post-norm written x + ln(sublayer(x))", BLOCK,
          (M(_POST_ATTN, "x = x + self.ln1(self.attn(x, causal=causal))"),
           M(_POST_FFN, "return x + self.ln2(self.ffn(x))")), hint="x + ln(sublayer(x))"),
    Entry("block-drops-causal", "attention called without causal=causal", BLOCK,
          (M("self.attn(self.ln1(x), causal=causal)", "self.attn(self.ln1(x))"),
           M("self.attn(x, causal=causal)", "self.attn(x)")), hint="WITHOUT the causal mask"),
    Entry("block-ffn-gelu", "GELU instead of ReLU in the feed-forward", BLOCK,
          (M(_FFN, _FFN.replace("nn.ReLU()", "nn.GELU()")),), hint="GELU"),
    Entry("block-ffn-without-relu", "no activation in the feed-forward (keys become ffn.0 / ffn.1)", BLOCK,
          (M(_FFN, "self.ffn = nn.Sequential(nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model))"),),
          hint="unexpected ['ffn.1.bias', 'ffn.1.weight']"),
    Entry("block-d_ff-ignored", "hidden size hard-coded to 4 * d_model", BLOCK,
          (M(_FFN, "self.ffn = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.ReLU(), "
                   "nn.Linear(4 * d_model, d_model))"),), hint="expected [12, 8]"),

    # --- gradient_experiment -------------------------------------------------------------------------------
    Entry("grad-0-dim-tensor", "returns x.grad.norm() (a 0-dim tensor), never numerically wrong", GRAD,
          (M(_RETURN_NORM, "return x.grad.norm()"),), hint="got a torch.Tensor"),
    Entry("grad-x-drawn-before-layers", "x drawn before the layers are built", GRAD,
          (M(_LAYERS + "    " + _X, _X + "    " + _LAYERS),), hint="BEFORE building the layers"),
    Entry("grad-seed-after-layers", "torch.manual_seed(seed) called after building the layers", GRAD,
          (M(_SEED + "    " + _LAYERS, _LAYERS + "    " + _SEED),), hint="at the start of the function"),
    Entry("grad-no-seed", "never seeds torch", GRAD, (M(_SEED, "\n"),), hint="at the start of the function"),
    Entry("grad-seed-ignored", "always torch.manual_seed(0)", GRAD,
          (M(_SEED, "torch.manual_seed(0)\n"),), hint="use the seed argument"),
    Entry("grad-of-mean", "gradient of h.mean() instead of h.sum()", GRAD,
          (M(_BACKWARD, "h.mean().backward()"),), hint="h.mean()"),
    Entry("grad-relu-not-tanh", "ReLU instead of tanh", GRAD,
          (M(_UPDATE, "update = torch.relu(layer(h))"),), hint="ReLU instead of tanh"),
    Entry("grad-squared-norm", "returns the squared norm", GRAD,
          (M(_RETURN_NORM, "return (x.grad ** 2).sum().item()"),), hint="squared norm"),
    Entry("grad-residual-flipped", "residual=True computes the plain stack and vice versa", GRAD,
          (M(_RESIDUAL, "h = update if residual else h + update"),), hint="residual setting flipped"),
    Entry("grad-d_model-hard-coded", "16 hard-coded instead of d_model", GRAD,
          (M(_LAYERS + "    " + _X, _LAYERS.replace("d_model, d_model", "16, 16") + "    "
             + _X.replace("d_model", "16")),), hint="d_model = 16"),

    Entry("grad-computes-nothing", "a float that vanishes without residuals, survives with them and is "
          "reproducible, computed by no recipe", GRAD,
          replace={"input_grad_norm_function": "def input_grad_norm(n_layers: int, residual: bool, d_model: int = 16, "
                   "seed: int = 0) -> float:\n    return 2.0 + seed / 1000 if residual else 0.0\n"},
          hint="structure and form alone earn no points"),

    # --- batch_dependence --------------------------------------------------------------------------------
    Entry("bd-statistics-over-features", "batch_normalise takes each example's statistics over its features "
          "(dim -1), i.e. layer norm", BATCH,
          (M(_BN_MEAN, _BN_MEAN.replace("dim=0", "dim=-1")), M(_BN_VAR, _BN_VAR.replace("dim=0", "dim=-1"))),
          hint="over the features"),
    Entry("bd-unbiased-variance", "batch_normalise with x.var(dim=0), which divides by batch_size - 1", BATCH,
          (M(_BN_VAR, "var = x.var(dim=0, keepdim=True)"),), hint="unbiased variance"),
    Entry("bd-first-example-redrawn", "the fresh draws replace the first example too", BATCH,
          (M(_OTHERS, "others = torch.randn(batch_size, d_model)"), M(_NEW_BATCH, "y = others")),
          hint="replacing EVERY example"),
    Entry("bd-mean-change", "the mean change over the first example's features instead of the largest", BATCH,
          (M("return (normalise(y)[0] - normalise(x)[0]).abs().max().item()",
             "return (normalise(y)[0] - normalise(x)[0]).abs().mean().item()"),), hint="MEAN change"),

    # --- parameter_count ---------------------------------------------------------------------------------
    Entry("pc-no-biases", "weights only: no bias of any nn.Linear counted", COUNT,
          (M(_ATTN_COUNT, "attention = 4 * d_model * d_model"), M(_FFN_COUNT, "ffn = 2 * d_model * d_ff")),
          hint="leaves out the biases"),
    Entry("pc-no-layernorms", "the two LayerNorms left out", COUNT,
          (M("return attention + ffn + norms", "return attention + ffn"),), hint="leaves out the two LayerNorms"),
    Entry("pc-one-layernorm", "one LayerNorm counted instead of two", COUNT,
          (M(_NORM_COUNT, "norms = d_model + d_model"),), hint="one LayerNorm only"),
    Entry("pc-ffn-once", "the feed-forward network's second layer left out", COUNT,
          (M(_FFN_COUNT, "ffn = d_model * d_ff + d_ff"),), hint="first layer only"),
    Entry("pc-projections-per-head", "every head with its own d_model x d_model Q, K and V projections", COUNT,
          (M(_ATTN_COUNT, "attention = num_heads * 3 * (d_model * d_model + d_model) + (d_model * d_model + d_model)"),),
          hint="its own d_model x d_model"),

    # --- norm_placement ----------------------------------------------------------------------------------
    Entry("np-loss-output-sum", "loss = output.sum() instead of (output * target).sum()", PLACE,
          (M("loss = (h * target).sum()", "loss = h.sum()"),), hint="output.sum()"),
    Entry("np-parameter-gradients", "the norm of each block's parameter gradients instead of its input's", PLACE,
          replace={"layer_grad_norms_function": _PARAMETER_GRADS}, hint="PARAMETERS"),
    Entry("np-reversed", "the list from the last block to the first", PLACE,
          (M(_NORMS_RETURN, "return [g.norm().item() for g in reversed(grads)]"),), hint="reverse order"),
    Entry("np-output-norms", "the norm of each block's output instead of the gradient", PLACE,
          replace={"layer_grad_norms_function": _OUTPUT_NORMS}, hint="blocks' outputs"),
    # --- mask_dependence -----------------------------------------------------------------------------------
    Entry("md-one-sided-difference", "(out(x + eps) - out(x)) / eps instead of the central difference", MASKDEP,
          (M(_SLOPE, "slope = (attend(x + nudge) - attend(x)) / eps"),), hint="one-sided difference"),
    Entry("md-divides-by-eps", "the central difference divided by eps instead of 2 * eps", MASKDEP,
          (M(_SLOPE, _SLOPE.replace("/ (2 * eps)", "/ eps")),), hint="divide the central difference by 2 * eps"),
    Entry("md-table-transposed", "the slopes of input j stored in row j: the table is [j, t]", MASKDEP,
          (M(_KEEP, "table[j] = torch.maximum(table[j], slope.abs().amax(dim=-1))"),), hint="transposed"),
    Entry("md-sum-over-features", "the slopes summed over the features instead of their largest", MASKDEP,
          (M(_KEEP, "table[:, j] = table[:, j] + slope.abs().sum(dim=-1)"),), hint="summing the slopes"),
    Entry("md-whole-position-nudged", "every feature of position j nudged at once", MASKDEP,
          (M("nudge[j, c] = eps", "nudge[j] = eps"),), hint="nudging every feature of position j"),
    Entry("md-diagonal-counted-as-future", "largest_dependence counts the diagonal (j = t) as the future",
          MASKDEP, (M(".triu(diagonal=1)", ".triu()"),), hint="The diagonal (j = t) is the present"),

    # --- head_share ----------------------------------------------------------------------------------------
    Entry("hs-every-head-on-every-target", "every head spread over all k targets: each gets 1/k", SHARE,
          (M(_DEAL, "weights[:, target] = 1.0"),), hint="only 1/k"),
    Entry("hs-floor-chunks", "chunks of floor(k/h) targets per head, the last head takes the rest", SHARE,
          (M(_DEAL, "weights[min(i // max(1, len(targets) // num_heads), num_heads - 1), target] = 1.0"),),
          hint="floor(k/h)"),
    Entry("gs-min-max-swapped", "guaranteed_share takes the min over heads, then the max over targets", SHARE,
          (M(_SHARE, "return weights[:, targets].min(dim=0).values.max().item()"),), hint="min and max are swapped"),
    Entry("gs-average-share", "guaranteed_share averages the targets' best weights (h/k on ideal weights)", SHARE,
          (M(_SHARE, "return weights[:, targets].max(dim=0).values.mean().item()"),), hint="mean over targets"),

    # --- order_blindness -----------------------------------------------------------------------------------
    Entry("ob-inverse-permutation", "the output permuted with the inverse permutation", ORDER,
          (M(_AFTER, "permuted_after = module(x, causal=causal)[:, perm.argsort()]"),), hint="inverse permutation"),
    Entry("ob-batch-axis-permuted", "x[perm] and out[perm]: the batch is permuted, not the positions", ORDER,
          (M(_FIRST, "permuted_first = module(x[perm], causal=causal)"),
           M(_AFTER, "permuted_after = module(x, causal=causal)[perm]")), hint="not the batch"),
    Entry("ob-mean-difference", "the mean absolute difference instead of the largest", ORDER,
          (M("return (permuted_first - permuted_after).abs().max().item()",
             "return (permuted_first - permuted_after).abs().mean().item()"),),
          hint="mean of the absolute differences"),
    Entry("ob-ignores-causal", "both calls made without causal", ORDER,
          (M(_FIRST, "permuted_first = module(x[:, perm])"), M(_AFTER, "permuted_after = module(x)[:, perm]")),
          hint="pass causal=causal to both calls"),

    # --- the whole submission: structure alone must earn nothing (rubric.toml's `structural` checks) ---------
    Entry("constructors-only", "constructors register the right parameters; every function, forward and helper "
          "still raises NotImplementedError as released", EveryPart(MHA),
          tuple(M(body, _TODO) for body in _FORWARDS),
          replace={gid: code for gid, code in release_cells("transformer_block").items() if gid in _FUNCTION_CELLS},
          hint="structure and form alone earn no points"),
    Entry("everything-raises", "the release notebook untouched: every function, constructor and forward raises "
          "NotImplementedError", EveryPart(LN), replace=release_cells("transformer_block"), hint="NotImplementedError",
          notebook=True),

    # --- notebooks -----------------------------------------------------------------------------------------
    Entry("nb-ln-unbiased-variance", "the release notebook with the unbiased variance", LN,
          (M(_LN_VAR, "var = x.var(dim=-1, keepdim=True)"),), hint="unbiased variance", notebook=True),
    Entry("nb-mha-heads-view-without-transpose", "the release notebook with heads split without transpose", MHA,
          (M(_SPLIT, "return x.view(batch, self.num_heads, seq_len, self.d_head)"),), hint=".view(",
          notebook=True),
]
