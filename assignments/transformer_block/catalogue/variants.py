"""Correct-but-different submissions: each must get full marks.  Mostly whole solution cells written another
legitimate way (see the package docstring for the format); the contract they respect is the one in the
suites' and the notebook's docstrings (names, signatures, parameters Wq/Wk/Wv/Wo, ln1/ln2, ffn.0/ffn.2 with
any buffers besides, bool masks with True = may attend, weights 0 for a query that may attend no key,
key_padding_mask with True = padding, a Python float from input_grad_norm)."""
from __future__ import annotations

from autograder.authoring.catalogue import Entry, M, Mutation

LN_VAR_MEAN_RSQRT = '''
def layer_norm(x, weight, bias, eps=1e-5):
    var, mean = torch.var_mean(x, dim=-1, keepdim=True, correction=0)
    return (x - mean) * torch.rsqrt(var + eps) * weight + bias
'''

LN_FLOAT64 = '''
def layer_norm(x, weight, bias, eps=1e-5):
    xd = x.double()
    mean = xd.mean(-1, keepdim=True)
    var = ((xd - mean) ** 2).mean(-1, keepdim=True)
    return ((xd - mean) / torch.sqrt(var + eps)).to(x.dtype) * weight + bias
'''

LN_ADDCMUL = '''
def layer_norm(x, weight, bias, eps=1e-5):
    centred = x - x.sum(dim=-1, keepdim=True) / x.shape[-1]
    std = torch.sqrt(x.var(dim=-1, keepdim=True, unbiased=False) + eps)
    return torch.addcmul(bias, centred / std, weight)
'''

LAYERNORM_INLINE = '''
class LayerNorm(nn.Module):
    """Computes the normalisation itself instead of calling layer_norm."""

    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.d_model, self.eps = d_model, eps
        self.weight = nn.Parameter(torch.empty(d_model))
        self.bias = nn.Parameter(torch.empty(d_model))
        self.reset_parameters()

    def reset_parameters(self):
        nn.init.ones_(self.weight)
        nn.init.zeros_(self.bias)

    def extra_repr(self):
        return f"{self.d_model}, eps={self.eps}"

    def forward(self, x):
        mean = x.mean(-1, keepdim=True)
        var = (x - mean).pow(2).mean(-1, keepdim=True)
        return self.weight * (x - mean) / (var + self.eps).sqrt() + self.bias
'''

MASK_ARANGE = '''
def causal_mask(seq_len, device=None):
    positions = torch.arange(seq_len, device=device)
    return positions[None, :] <= positions[:, None]
'''

MASK_TRIU_NOT = '''
def causal_mask(seq_len, device=None):
    return ~torch.triu(torch.ones(seq_len, seq_len, dtype=torch.bool, device=device), diagonal=1)
'''


def _attention(scores: str, fill: str, softmax: str = "return torch.softmax(scores, dim=-1)",
               sdpa: str = "return attention_weights(q, k, mask) @ v") -> str:
    return f'''
def attention_weights(q, k, mask=None):
    {scores}
    if mask is not None:
        {fill}
    {softmax}


def scaled_dot_product_attention(q, k, v, mask=None):
    {sdpa}
'''


# Each zeroes the weights of a query that may attend no key its own way, with finite gradients: a finite fill
# (uniform row) times the mask, torch.where, no -inf added to such a row, a clamped maximum and sum, a row-level
# any(), nan_to_num of softmax's 0/0 (safe after masked_fill, whose backward drops the NaN gradient; not after an
# additive -inf mask, see the mistake att-additive-mask-nan-gradients).
ATT_EINSUM = _attention('scores = torch.einsum("...qd,...kd->...qk", q, k) / math.sqrt(q.shape[-1])',
                        "scores = scores.masked_fill(~mask, -1e9)",
                        softmax="weights = torch.softmax(scores, dim=-1)\n"
                                "    return weights if mask is None else weights * mask",
                        sdpa='return torch.einsum("...qk,...kd->...qd", attention_weights(q, k, mask), v)')
ATT_WHERE_FINFO = _attention("scores = torch.matmul(q, k.transpose(-1, -2)) * q.shape[-1] ** -0.5",
                             "scores = torch.where(mask, scores, torch.finfo(scores.dtype).min)",
                             softmax="weights = F.softmax(scores, dim=-1)\n"
                                     "    return weights if mask is None else torch.where(mask, weights, 0.0)",
                             sdpa="return torch.matmul(attention_weights(q, k, mask), v)")
ATT_ADDITIVE = _attention("scores = (q / math.sqrt(q.shape[-1])) @ k.transpose(-1, -2)",
                          "sees_some = mask.any(dim=-1, keepdim=True)\n"
                          "        scores = scores + torch.zeros(mask.shape, dtype=scores.dtype).masked_fill("
                          "~mask & sees_some, float('-inf'))",
                          softmax="weights = torch.softmax(scores, dim=-1)\n"
                                  "    return weights if mask is None else weights * sees_some")
ATT_STABLE_SOFTMAX = _attention("scores = q @ k.mT / math.sqrt(q.size(-1))",
                                "scores = scores.masked_fill(mask.logical_not(), float('-inf'))",
                                softmax="finfo = torch.finfo(scores.dtype)\n"
                                        "    top = scores.amax(dim=-1, keepdim=True).clamp_min(finfo.min)\n"
                                        "    shifted = torch.exp(scores - top)\n"
                                        "    return shifted / shifted.sum(dim=-1, keepdim=True).clamp_min(finfo.tiny)")
ATT_FLOAT64 = _attention("scores = q.double() @ k.double().transpose(-2, -1) / math.sqrt(q.shape[-1])",
                         "scores = scores.masked_fill(~mask, float('-inf'))",
                         softmax="weights = torch.softmax(scores, dim=-1)\n"
                                 "    if mask is not None:\n"
                                 "        weights = weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)\n"
                                 "    return weights.to(q.dtype)")

ATT_BADDBMM = '''
def attention_weights(q, k, mask=None):
    lead = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2])
    s_q, d = q.shape[-2:]
    s_k = k.shape[-2]
    q3 = q.expand(*lead, s_q, d).reshape(-1, s_q, d)
    k3 = k.expand(*lead, s_k, d).reshape(-1, s_k, d)
    empty = torch.zeros(q3.shape[0], s_q, s_k, dtype=q.dtype)
    scores = torch.baddbmm(empty, q3, k3.transpose(1, 2), beta=0.0, alpha=1 / math.sqrt(d)).reshape(*lead, s_q, s_k)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.nan_to_num(scores.softmax(dim=-1), nan=0.0)


def scaled_dot_product_attention(q, k, v, mask=None):
    weights = attention_weights(q, k, mask)
    lead = weights.shape[:-2]
    v3 = v.expand(*lead, *v.shape[-2:]).reshape(-1, *v.shape[-2:])
    return torch.bmm(weights.reshape(-1, *weights.shape[-2:]), v3).reshape(*lead, weights.shape[-2], v.shape[-1])
'''

MHA_FUSED_QKV = '''
import torch.nn.functional as F


class MultiHeadAttention(nn.Module):
    """One fused input projection, computed from the three registered Linear layers at forward time."""

    def __init__(self, d_model, num_heads, bias=True):
        super().__init__()
        if d_model % num_heads:
            raise ValueError("num_heads must divide d_model")
        self.num_heads, self.d_head = num_heads, d_model // num_heads
        self.Wq, self.Wk, self.Wv, self.Wo = (nn.Linear(d_model, d_model, bias=bias) for _ in range(4))

    def qkv(self, x):
        weight = torch.cat([self.Wq.weight, self.Wk.weight, self.Wv.weight])
        bias = None if self.Wq.bias is None else torch.cat([self.Wq.bias, self.Wk.bias, self.Wv.bias])
        b, s, _ = x.shape
        return F.linear(x, weight, bias).reshape(b, s, 3, self.num_heads, self.d_head).permute(2, 0, 3, 1, 4)

    def forward(self, x, causal=False, key_padding_mask=None):
        b, s, d = x.shape
        q, k, v = self.qkv(x).unbind(0)
        allowed = torch.ones(b, 1, s, s, dtype=torch.bool)
        if causal:
            allowed = allowed & causal_mask(s)
        if key_padding_mask is not None:
            allowed = allowed & ~key_padding_mask.view(b, 1, 1, s)
        heads = scaled_dot_product_attention(q, k, v, allowed)
        return self.Wo(heads.permute(0, 2, 1, 3).reshape(b, s, d))
'''

MHA_PER_HEAD_LOOP = '''
class MultiHeadAttention(nn.Module):
    """Attends head by head over column slices, then concatenates."""

    def __init__(self, d_model, num_heads, bias=True):
        super().__init__()
        if d_model % num_heads != 0:
            raise ValueError(f"{d_model} is not a multiple of {num_heads}")
        self.num_heads = num_heads
        self.d_head = d_model // num_heads
        self.Wq = nn.Linear(d_model, d_model, bias=bias)
        self.Wk = nn.Linear(d_model, d_model, bias=bias)
        self.Wv = nn.Linear(d_model, d_model, bias=bias)
        self.Wo = nn.Linear(d_model, d_model, bias=bias)

    def head(self, t, h):
        return t[..., h * self.d_head:(h + 1) * self.d_head]

    def forward(self, x, causal=False, key_padding_mask=None):
        q, k, v = self.Wq(x), self.Wk(x), self.Wv(x)
        mask = causal_mask(x.shape[1]) if causal else None
        if key_padding_mask is not None:
            keep = ~key_padding_mask.unsqueeze(1)  # [B, 1, S]: one row of keys for every query of a head
            mask = keep if mask is None else torch.logical_and(mask, keep)
        outs = [scaled_dot_product_attention(self.head(q, h), self.head(k, h), self.head(v, h), mask)
                for h in range(self.num_heads)]
        return self.Wo(torch.cat(outs, dim=-1))
'''

MHA_UNFLATTEN = '''
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model: int, num_heads: int, bias: bool = True) -> None:
        super().__init__()
        if d_model % num_heads != 0:
            raise ValueError("d_model must be divisible by num_heads")
        self.h = num_heads
        self.Wq = nn.Linear(d_model, d_model, bias=bias)
        self.Wk = nn.Linear(d_model, d_model, bias=bias)
        self.Wv = nn.Linear(d_model, d_model, bias=bias)
        self.Wo = nn.Linear(d_model, d_model, bias=bias)

    def split_heads(self, t):
        return t.unflatten(-1, (self.h, -1)).transpose(1, 2)

    def merge_heads(self, t):
        return t.transpose(1, 2).flatten(2)

    def forward(self, x, causal=False, key_padding_mask=None):
        q, k, v = map(self.split_heads, (self.Wq(x), self.Wk(x), self.Wv(x)))
        scores = (q * q.shape[-1] ** -0.5) @ k.transpose(-2, -1)
        if causal:
            seq = x.shape[1]
            scores = scores.masked_fill(torch.triu(torch.ones(seq, seq, dtype=torch.bool), 1), float("-inf"))
        if key_padding_mask is not None:
            scores = scores.masked_fill(key_padding_mask[:, None, None, :], float("-inf"))
        attn = scores.softmax(-1)
        attn = torch.where(torch.isnan(attn), torch.zeros_like(attn), attn)  # no key to attend to: weights 0
        return self.Wo(self.merge_heads(attn @ v))
'''

BLOCK_TORCH_STYLE = '''
class TransformerBlock(nn.Module):
    """Written like torch.nn.TransformerEncoderLayer: one helper per sublayer."""

    def __init__(self, d_model, num_heads, d_ff, norm_first=False):
        super().__init__()
        self.norm_first = bool(norm_first)
        self.attn = MultiHeadAttention(d_model, num_heads)
        self.ln1, self.ln2 = LayerNorm(d_model), LayerNorm(d_model)
        self.ffn = nn.Sequential(nn.Linear(d_model, d_ff), nn.ReLU(inplace=True), nn.Linear(d_ff, d_model))

    def _sa_block(self, x, causal):
        return self.attn(x, causal=causal)

    def _ff_block(self, x):
        return self.ffn[2](torch.relu(self.ffn[0](x)))

    def forward(self, x, causal=False):
        if self.norm_first:
            x = x + self._sa_block(self.ln1(x), causal)
            x = x + self._ff_block(self.ln2(x))
        else:
            x = self.ln1(self._sa_block(x, causal) + x)
            x = self.ln2(self._ff_block(x) + x)
        return x
'''

GRAD_AUTOGRAD = '''
def input_grad_norm(n_layers, residual, d_model=16, seed=0):
    torch.manual_seed(seed)
    layers = nn.ModuleList([nn.Linear(d_model, d_model) for _ in range(n_layers)])
    x = torch.randn(1, d_model).requires_grad_()
    h = x
    for layer in layers:
        h = torch.tanh(layer(h)) + h if residual else torch.tanh(layer(h))
    (grad,) = torch.autograd.grad(h.sum(), x)
    return float(torch.linalg.vector_norm(grad))
'''

NOISY_GLOBAL_RNG = '''
# uses the global RNG everywhere: at import, in __init__ and in every forward (results discarded)
torch.manual_seed(1234)
_noise = torch.randn(1000)


class _Noisy:
    def poke(self):
        torch.rand(3)
        torch.manual_seed(int(torch.randint(0, 10_000, ())))


_base_layer_norm, _base_mha, _base_block = LayerNorm, MultiHeadAttention, TransformerBlock


class LayerNorm(_base_layer_norm, _Noisy):
    def forward(self, x):
        self.poke()
        return super().forward(x)


class MultiHeadAttention(_base_mha, _Noisy):
    def __init__(self, *args, **kwargs):
        torch.manual_seed(99)
        super().__init__(*args, **kwargs)

    def forward(self, x, causal=False, key_padding_mask=None):
        self.poke()
        return super().forward(x, causal=causal, key_padding_mask=key_padding_mask)


class TransformerBlock(_base_block, _Noisy):
    def forward(self, x, causal=False):
        self.poke()
        return super().forward(x, causal=causal)


_base_sdpa = scaled_dot_product_attention


def scaled_dot_product_attention(q, k, v, mask=None):
    torch.randn(2)
    return _base_sdpa(q, k, v, mask)
'''

SCRIPT_NOISE = '''
%matplotlib inline
!pip list
print("checking my work")
if __name__ == "__main__":
    print(layer_norm(torch.randn(2, 3), torch.ones(3), torch.zeros(3)))
    print(MultiHeadAttention(8, 2)(torch.randn(1, 4, 8), causal=True).shape)
'''

FIRST_ATTEMPT_LAYER_NORM = '''
def layer_norm(x, weight, bias, eps=1e-5):
    # first attempt (wrong: unbiased variance); fixed in a later cell
    return (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, keepdim=True) + eps) * weight + bias
'''

LATER_FIX = '''
print("redefining layer_norm after finding the bug")


def layer_norm(x, weight, bias, eps=1e-5):
    mean = x.mean(dim=-1, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * weight + bias


print(layer_norm(torch.randn(2, 4), torch.ones(4), torch.zeros(4)))
'''

HELPERS = '''
def count_parameters(module):
    return sum(p.numel() for p in module.parameters())


print("parameters:", count_parameters(TransformerBlock(16, 4, 64)))
demo = TransformerBlock(16, 4, 64, norm_first=True)
print(demo(torch.randn(2, 5, 16), causal=True).shape)
'''

# The causal mask registered as a buffer in __init__, as well-known public code does; the contract fixes the
# parameters only, so these must get full marks.  Each is sized by a constructor argument with a default (the
# signature MultiHeadAttention(d_model, num_heads, bias=True) keeps working), 1024 positions by default as in
# the originals (the suites use at most 12), and sliced to seq_len in forward.
_MHA_INIT = "def __init__(self, d_model: int, num_heads: int, bias: bool = True) -> None:"
_WO = "self.Wo = nn.Linear(d_model, d_model, bias=bias)"
_MASK_LINE = "mask = causal_mask(seq_len, device=x.device) if causal else None"
_MASK_AND_SDPA = (f"{_MASK_LINE}\n"
                  "        if key_padding_mask is not None:\n"
                  "            # [B, S], True = padding  ->  [B, 1, 1, S], True = may attend: the same for every head and "
                  "query\n"
                  "            keys_kept = ~key_padding_mask[:, None, None, :]\n"
                  "            mask = keys_kept if mask is None else mask & keys_kept\n"
                  "        heads = scaled_dot_product_attention(q, k, v, mask)")
# their own softmax, like the originals; padding as they would add it, a query with no key to attend to zeroed
_OWN_PADDING = ("        if key_padding_mask is not None:\n"
                '            {scores} = {scores}.masked_fill(key_padding_mask[:, None, None, :], float("-inf"))\n')


def _buffered_mask(size_arg: str, register: str, attend: str, replaced: str = _MASK_AND_SDPA
                   ) -> tuple[Mutation, ...]:
    return (M(_MHA_INIT, _MHA_INIT.replace(") -> None:", f", {size_arg}: int = 1024) -> None:")),
            M(_WO, f"{_WO}\n        {register}"), M(replaced, attend))


MINGPT_BIAS_BUFFER = _buffered_mask(  # minGPT's CausalSelfAttention
    "block_size", 'self.register_buffer("bias", torch.tril(torch.ones(block_size, block_size))'
                  '.view(1, 1, block_size, block_size))',
    "att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))\n"
    "        if causal:\n"
    '            att = att.masked_fill(self.bias[:, :, :seq_len, :seq_len] == 0, float("-inf"))\n'
    + _OWN_PADDING.format(scores="att") +
    "        heads = torch.softmax(att, dim=-1).nan_to_num(0.0) @ v")
LLMS_FROM_SCRATCH_MASK_BUFFER = _buffered_mask(  # "Build a Large Language Model (From Scratch)", chapter 3
    "context_length", 'self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), '
                      'diagonal=1))',
    "attn_scores = q @ k.transpose(2, 3)\n"
    "        if causal:\n"
    "            attn_scores.masked_fill_(self.mask.bool()[:seq_len, :seq_len], -torch.inf)\n"
    + _OWN_PADDING.format(scores="attn_scores") +
    "        weights = torch.softmax(attn_scores / k.shape[-1] ** 0.5, dim=-1)\n"
    "        heads = torch.where(weights.isnan(), 0.0, weights) @ v")
NON_PERSISTENT_MASK_BUFFER = _buffered_mask(
    "max_len", 'self.register_buffer("allowed", causal_mask(max_len), persistent=False)',
    "mask = self.allowed[:seq_len, :seq_len] if causal else None", replaced=_MASK_LINE)

BATCH_VAR_RSQRT = '''
def batch_normalise(x, eps=1e-5):
    var = x.var(dim=0, unbiased=False)
    return (x - x.mean(dim=0)) * torch.rsqrt(var + eps)


def batch_dependence(kind, batch_size=8, d_model=16, seed=0):
    if kind not in ("layer", "batch"):
        raise ValueError(kind)
    torch.manual_seed(seed)
    first = torch.randn(batch_size, d_model)
    second = first.clone()
    second[1:] = torch.randn(batch_size - 1, d_model)
    if kind == "layer":
        w, b = torch.ones(d_model), torch.zeros(d_model)
        before, after = layer_norm(first, w, b)[0], layer_norm(second, w, b)[0]
    else:
        before, after = batch_normalise(first)[0], batch_normalise(second)[0]
    return float(torch.max(torch.abs(after - before)))
'''

COUNT_BY_LAYERS = '''
def block_parameter_count(d_model, num_heads, d_ff):
    linears = [(d_model, d_model)] * 4 + [(d_model, d_ff), (d_ff, d_model)]  # (in, out) of every nn.Linear
    return sum((n_in + 1) * n_out for n_in, n_out in linears) + 2 * 2 * d_model
'''

NORMS_RETAIN_GRAD = '''
def layer_grad_norms(blocks, x, target):
    inputs, h = [], x.clone().requires_grad_(True)
    for block in blocks:
        h.retain_grad()
        inputs.append(h)
        h = block(h)
    torch.sum(h * target).backward()
    return [float(torch.linalg.vector_norm(t.grad)) for t in inputs]
'''

NORMS_BLOCK_BY_BLOCK = '''
def layer_grad_norms(blocks, x, target):
    # each block on a detached copy of its input, then the gradient handed down one block at a time
    inputs, outputs, h = [], [], x
    for block in blocks:
        start = h.detach().requires_grad_()
        inputs.append(start)
        h = block(start)
        outputs.append(h)
    grad, norms = target, []
    for start, out in zip(reversed(inputs), reversed(outputs)):
        (grad,) = torch.autograd.grad(out, start, grad_outputs=grad)
        norms.append(grad.norm().item())
    return norms[::-1]
'''

MASK_DEPENDENCE_BATCHED = '''
def mask_dependence(seq_len, d_model, causal, seed=0, eps=1e-3):
    """Every nudge at once: a batch [seq_len, d_model, seq_len, d_model] through one attention call."""
    torch.manual_seed(seed)
    x = torch.randn(seq_len, d_model, dtype=torch.float64)
    mask = causal_mask(seq_len) if causal else None
    nudges = eps * torch.eye(seq_len * d_model, dtype=torch.float64).view(seq_len, d_model, seq_len, d_model)
    plus, minus = x + nudges, x - nudges
    slopes = (scaled_dot_product_attention(plus, plus, plus, mask)
              - scaled_dot_product_attention(minus, minus, minus, mask)).abs() / (2 * eps)  # [j, c, t, i]
    return slopes.amax(dim=(1, 3)).T.contiguous()


def largest_dependence(table):
    n = table.shape[0]
    future = max(float(table[t, j]) for t in range(n) for j in range(t + 1, n))
    past = max(float(table[t, j]) for t in range(n) for j in range(t + 1))
    return future, past
'''

HEAD_SHARE_STRIDED = '''
def ideal_head_weights(targets, num_heads, seq_len):
    """Round robin by strided slices (head t holds targets[t::h]); a head left without one is uniform."""
    weights = torch.full((num_heads, seq_len), 1.0 / seq_len, dtype=torch.float64)
    for head in range(num_heads):
        mine = targets[head::num_heads]
        if mine:
            weights[head] = 0.0
            weights[head, mine] = 1.0 / len(mine)
    return weights


def guaranteed_share(weights, targets):
    return float(min(max(float(weights[h, t]) for h in range(weights.shape[0])) for t in targets))
'''

PERMUTATION_ERROR_ONE_CALL = '''
def permutation_error(module, x, perm, causal=False):
    """Both routes through the module in one batched call."""
    both = module(torch.cat([x.index_select(1, perm), x]), causal=causal)
    first, after = both[: x.shape[0]], both[x.shape[0]:].index_select(1, perm)
    return float(torch.amax(torch.abs(after - first)).detach())
'''

VARIANTS: list[Entry] = [
    Entry("var_mean-rsqrt-einsum", "var_mean + rsqrt layer norm; einsum attention with a -1e9 fill",
          replace={"layer_norm_function": LN_VAR_MEAN_RSQRT, "attention_functions": ATT_EINSUM}),
    Entry("float64-internals", "layer norm and attention computed in float64 internally, cast back",
          replace={"layer_norm_function": LN_FLOAT64, "attention_functions": ATT_FLOAT64}),
    Entry("addcmul-inline-LayerNorm", "var(unbiased=False) + addcmul; LayerNorm computing inline, with "
          "reset_parameters and extra_repr", replace={"layer_norm_function": LN_ADDCMUL,
                                                      "layer_norm_module": LAYERNORM_INLINE}),
    Entry("where-finfo-min", "torch.where(mask, scores, finfo.min), q.shape[-1] ** -0.5, F.softmax",
          replace={"attention_functions": "import torch.nn.functional as F\n" + ATT_WHERE_FINFO}),
    Entry("additive-inf-mask", "an additive 0/-inf mask built from the bool mask; causal_mask by arange",
          replace={"attention_functions": ATT_ADDITIVE, "causal_mask_function": MASK_ARANGE}),
    Entry("stable-softmax-by-hand", "exp(s - max) / sum written out; causal_mask as ~triu(1)",
          replace={"attention_functions": ATT_STABLE_SOFTMAX, "causal_mask_function": MASK_TRIU_NOT}),
    Entry("baddbmm-bmm", "attention with baddbmm and bmm over flattened batch dimensions",
          replace={"attention_functions": ATT_BADDBMM}),
    Entry("fused-qkv", "one fused QKV projection built from Wq/Wk/Wv at forward time",
          replace={"multi_head_attention_class": MHA_FUSED_QKV}),
    Entry("per-head-loop", "multi-head attention one head at a time over column slices",
          replace={"multi_head_attention_class": MHA_PER_HEAD_LOOP}),
    Entry("unflatten-own-scores", "heads via unflatten/flatten, own scores with q pre-scaled, triu mask",
          replace={"multi_head_attention_class": MHA_UNFLATTEN}),
    Entry("torch-style-block", "block with _sa_block/_ff_block helpers and an in-place ReLU",
          replace={"transformer_block_class": BLOCK_TORCH_STYLE}),
    Entry("grad-autograd-grad", "ModuleList, autograd.grad, float(vector_norm), tanh(...) + h",
          replace={"input_grad_norm_function": GRAD_AUTOGRAD}),
    Entry("batch-clone-rsqrt", "batch norm with var(unbiased=False) and rsqrt, mean without keepdim; the new "
          "batch by clone and slice assignment, float(torch.max(...))",
          replace={"batch_dependence_functions": BATCH_VAR_RSQRT}),
    Entry("count-by-layer-list", "the parameter count summed over a list of the nn.Linear shapes",
          replace={"parameter_count_function": COUNT_BY_LAYERS}),
    Entry("grad-norms-retain-grad", "retain_grad and backward, torch.linalg.vector_norm",
          replace={"layer_grad_norms_function": NORMS_RETAIN_GRAD}),
    Entry("grad-norms-block-by-block", "every block on a detached input, the gradient handed down block by block",
          replace={"layer_grad_norms_function": NORMS_BLOCK_BY_BLOCK}),
    Entry("global-rng-everywhere", "seeds and draws from the global RNG at import and in every forward",
          after=(NOISY_GLOBAL_RNG,)),
    Entry("script-with-magics-and-prints", "prints, IPython magics and a __main__ demo block", after=(SCRIPT_NOISE,)),
    Entry("redefined-in-later-cell", "a wrong first attempt, fixed by a redefinition in a later cell",
          replace={"layer_norm_function": FIRST_ATTEMPT_LAYER_NORM}, after=(LATER_FIX, HELPERS)),
    Entry("nb-reference", "the release notebook filled with the reference (visible checks and plots run)",
          notebook=True),
    Entry("nb-mingpt-bias-buffer", "notebook: minGPT's causal mask, a persistent buffer named `bias` sliced in "
          "forward, with its own masked_fill and softmax", mutations=MINGPT_BIAS_BUFFER, notebook=True),
    Entry("llms-from-scratch-mask-buffer", "an upper-triangular persistent buffer named `mask`, masked_fill_ "
          "with -inf, scaled after masking", mutations=LLMS_FROM_SCRATCH_MASK_BUFFER),
    Entry("non-persistent-mask-buffer", "the bool causal mask built once as a non-persistent buffer, sliced in "
          "forward", mutations=NON_PERSISTENT_MASK_BUFFER),
    Entry("nb-fused-qkv-einsum", "notebook: fused QKV and einsum attention",
          replace={"multi_head_attention_class": MHA_FUSED_QKV, "attention_functions": ATT_EINSUM},
          notebook=True),
    Entry("md-batched-nudges", "mask_dependence with every nudge in one batched attention call; "
          "largest_dependence by Python loops", replace={"mask_dependence_function": MASK_DEPENDENCE_BATCHED}),
    Entry("hs-strided-slices", "round robin as strided slices targets[t::h], idle heads filled first, float64 "
          "weights; guaranteed_share by Python min and max", replace={"head_share_functions": HEAD_SHARE_STRIDED}),
    Entry("ob-one-batched-call", "permutation_error with both routes in one batched module call (index_select, "
          "amax)", replace={"order_blindness_function": PERMUTATION_ERROR_ONE_CALL}),
]
