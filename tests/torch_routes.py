"""Routes by which a transformer_block submission reaches torch's own implementation of a graded operation
(tests/test_torch_routes.py grades each: it must earn nothing in the part it cheats), and honest variants that
must keep every point however the rule is written.  Found by searching the installed torch 2.13 (its Python
source and its registered operators) for every implementation of layer norm, softmax attention, multi-head
attention and the encoder layer, and trying each.

Each entry replaces one solution cell of the reference, named by its nbgrader grade_id, wholesale (as the
catalogue's `Entry.replace` does; tests/test_forbidden.py's ATTACKS instead rewrite the body of layer_norm by
find-and-replace, which cannot express routes living in a class).  The other cells stay the reference's, so
every part not named keeps full marks.  The cells and what they define:

    layer_norm_function         def layer_norm(x, weight, bias, eps=1e-5)
    layer_norm_module           class LayerNorm
    causal_mask_function        def causal_mask(seq_len, device=None)
    attention_functions         def attention_weights(q, k, mask=None), def scaled_dot_product_attention(q, k, v, mask=None)
    multi_head_attention_class  class MultiHeadAttention (Wq, Wk, Wv, Wo), forward(x, causal=False, key_padding_mask=None)
    transformer_block_class     class TransformerBlock (attn, ln1, ln2, ffn), forward(x, causal=False)
    input_grad_norm_function    def input_grad_norm(n_layers, residual, d_model=16, seed=0)

ROUTES:     name -> (part it cheats, solution cell it replaces, replacement source, why it is torch's own code)
BORDERLINE: the same shape; a general-purpose operation that computes part of the graded thing (F.normalize
            is an L2 normalisation): allowed, it earns what its numbers earn
LEGITIMATE: list of (name, part it exercises, solution cell it replaces, replacement source, why it is honest);
            each must keep every point.
COPIED:     the same shape as ROUTES; torch's source of a graded operation pasted into the cell as a student
            would paste it (docstring and comments gone, laid out anew, renamed): no longer torch's code object,
            so it may run, and the result flags it for review (autograder/judging/resemblance.py).  Built from
            the installed torch when the tests run, so that none of torch's text is kept here.
"""
from __future__ import annotations

import ast
import inspect
import textwrap

ASSIGNMENT = "transformer_block"

# -- shared pieces of replacement sources ---------------------------------------------------------------------

_MHA_INIT = '''
    def __init__(self, d_model: int, num_heads: int, bias: bool = True) -> None:
        super().__init__()
        if d_model % num_heads != 0:
            raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
        self.num_heads = num_heads
        self.d_head = d_model // num_heads
        self.Wq = nn.Linear(d_model, d_model, bias=bias)
        self.Wk = nn.Linear(d_model, d_model, bias=bias)
        self.Wv = nn.Linear(d_model, d_model, bias=bias)
        self.Wo = nn.Linear(d_model, d_model, bias=bias)
'''

_BLOCK_INIT = '''
    def __init__(self, d_model: int, num_heads: int, d_ff: int, norm_first: bool = False) -> None:
        super().__init__()
        self.norm_first = norm_first
        self.attn = MultiHeadAttention(d_model, num_heads, bias=True)
        self.ln1 = LayerNorm(d_model)
        self.ln2 = LayerNorm(d_model)
        self.ffn = nn.Sequential(nn.Linear(d_model, d_ff), nn.ReLU(), nn.Linear(d_ff, d_model))
'''

# a MultiHeadAttention whose forward hands its weights to `my_attention_forward`, a copy of torch's
# F.multi_head_attention_forward defined by the cell before it (compiled afresh, or pasted)
_MHA_THROUGH_FUNCTIONAL = '''
class MultiHeadAttention(nn.Module):''' + _MHA_INIT + '''
    def forward(self, x, causal=False):
        d_model = x.shape[-1]
        seq = x.transpose(0, 1)  # torch's layout: [S, B, d]
        bias = None if self.Wq.bias is None else torch.cat([self.Wq.bias, self.Wk.bias, self.Wv.bias])
        mask = ~causal_mask(x.shape[1], device=x.device) if causal else None
        out, _ = my_attention_forward(
            seq, seq, seq, d_model, self.num_heads, None, bias, None, None, False, 0.0, self.Wo.weight, self.Wo.bias,
            training=False, need_weights=True, attn_mask=mask, use_separate_proj_weight=True,
            q_proj_weight=self.Wq.weight, k_proj_weight=self.Wk.weight, v_proj_weight=self.Wv.weight)
        return out.transpose(0, 1)
'''

# ctypes into libtorch_cpu.so's C ABI for AOTInductor (the c_shim_cpu functions), which calls the CPU kernel
# (or the composite implementation) directly, without the dispatcher and so without the kit's overrides
_AOTI_SHIM = '''
import ctypes
import os

_py = ctypes.pythonapi
_py.PyCapsule_GetPointer.restype, _py.PyCapsule_GetPointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
_py.PyCapsule_New.restype, _py.PyCapsule_New.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_libtorch = ctypes.CDLL(os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cpu.so"))


def _handles(*tensors):
    capsules = torch._C._aoti.unsafe_alloc_void_ptrs_from_tensors([t.detach().contiguous() for t in tensors])
    return capsules, [ctypes.c_void_p(_py.PyCapsule_GetPointer(c, None)) for c in capsules]


def _tensors(*handles):
    return torch._C._aoti.alloc_tensors_by_stealing_from_void_ptrs(
        [_py.PyCapsule_New(h.value, None, None) for h in handles])
'''


def _flex(call: str) -> str:
    """attention_functions on top of `call(q4, k4, v4, score_mod)`, q4/k4/v4 of shape [B, 1, S, d]."""
    return f'''
def _torch_attention(q, k, v, mask):
    lead = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2], () if mask is None else mask.shape[:-2])
    s_q, s_k = q.shape[-2], k.shape[-2]

    def flat(t):
        return t.expand(*lead, *t.shape[-2:]).reshape(-1, 1, *t.shape[-2:])

    allowed = None if mask is None else mask.expand(*lead, s_q, s_k).reshape(-1, s_q, s_k)

    def score_mod(score, b, h, q_idx, kv_idx):
        return score if allowed is None else torch.where(allowed[b, q_idx, kv_idx], score, -float("inf"))

    out = {call}
    return out.reshape(*lead, s_q, v.shape[-1])


def attention_weights(q, k, mask=None):
    """torch's attention of the identity matrix: the weights themselves."""
    return _torch_attention(q, k, torch.eye(k.shape[-2], dtype=q.dtype, device=q.device), mask)


def scaled_dot_product_attention(q, k, v, mask=None):
    return _torch_attention(q, k, v, mask)
'''


def _ln(body: str) -> str:
    return "def layer_norm(x, weight, bias, eps=1e-5):\n" + body


# -- routes ---------------------------------------------------------------------------------------------------

ROUTES: dict[str, tuple[str, str, str, str]] = {
    # layer_norm ---------------------------------------------------------------------------------------------
    "ln-refs-normalize": ("layer_norm", "layer_norm_function", "import torch._refs\n\n\n" + _ln(
        "    return torch._refs._normalize(x, [-1], eps)[0] * weight + bias\n"),
        "torch._refs._normalize is the helper torch._refs.native_layer_norm normalises with (mean, rstd, out)"),
    "ln-meta-py-kernel": ("layer_norm", "layer_norm_function", _ln(
        "    ref = torch.ops.aten.native_layer_norm.default.py_kernels[torch._C.DispatchKey.Meta]\n"
        "    return ref(x, list(x.shape[-1:]), weight, bias, eps)[0]\n"),
        "the Meta python kernel of aten.native_layer_norm is torch._refs.native_layer_norm itself, captured "
        "before the kit replaced the module attribute"),
    "ln-batch-norm-legit-no-stats-overload": ("layer_norm", "layer_norm_function", _ln(
        "    rows = x.reshape(-1, x.shape[-1]).t()  # one batch-norm 'channel' per position\n"
        "    normed = torch.ops.aten._native_batch_norm_legit.no_stats(rows, None, None, True, 0.0, eps)[0]\n"
        "    return normed.t().reshape(x.shape) * weight + bias\n"),
        "torch's native batch-norm CPU kernel; only the default overload of _native_batch_norm_legit is "
        "overridden, not .no_stats"),
    "ln-batch-norm-with-update": ("layer_norm", "layer_norm_function", _ln(
        "    rows = x.reshape(-1, x.shape[-1]).t()\n"
        "    ones, zeros = torch.ones(rows.shape[1], dtype=x.dtype), torch.zeros(rows.shape[1], dtype=x.dtype)\n"
        "    # identity affine and dummy running statistics (its backward needs a weight)\n"
        "    normed = torch.ops.aten._batch_norm_with_update(rows, ones, zeros, zeros.clone(), ones.clone(), 0.0, eps)[0]\n"
        "    return normed.t().reshape(x.shape) * weight + bias\n"),
        "aten::_batch_norm_with_update, a newer batch-norm entry point with its own CPU kernel (torch's batch "
        "norm); not on the list"),
    "ln-batch-norm-with-update-functional": ("layer_norm", "layer_norm_function", _ln(
        "    rows = x.reshape(-1, x.shape[-1]).t()\n"
        "    ones, zeros = torch.ones(rows.shape[1], dtype=x.dtype), torch.zeros(rows.shape[1], dtype=x.dtype)\n"
        "    normed = torch.ops.aten._batch_norm_with_update_functional(rows, ones, zeros, zeros, ones, 0.0, eps)[0]\n"
        "    return normed.t().reshape(x.shape) * weight + bias\n"),
        "the functional twin of aten::_batch_norm_with_update, the same batch-norm kernel; not on the list"),
    "ln-decomp-batch-norm-helper": ("layer_norm", "layer_norm_function", "import torch._decomp.decompositions\n\n\n" + _ln(
        "    rows = x.reshape(-1, x.shape[-1]).t()\n"
        "    helper = torch._decomp.decompositions.native_batch_norm_helper\n"
        "    normed = helper(rows, None, None, None, None, True, 0.0, eps, False)[0]\n"
        "    return normed.t().reshape(x.shape) * weight + bias\n"),
        "torch._decomp's Python batch norm (the decomposition of native_batch_norm), under a name not listed"),
    "ln-decomp-batch-norm-legit-no-stats": ("layer_norm", "layer_norm_function", "import torch._decomp.decompositions\n\n\n" + _ln(
        "    rows = x.reshape(-1, x.shape[-1]).t()\n"
        "    normed = torch._decomp.decompositions._native_batch_norm_legit_no_stats(rows, None, None, True, 0.0, eps)[0]\n"
        "    return normed.t().reshape(x.shape) * weight + bias\n"),
        "torch._decomp's Python decomposition of _native_batch_norm_legit.no_stats: its function name is not "
        "the operator's, so _disable_python misses it"),
    "ln-local-response-norm": ("layer_norm", "layer_norm_function", _ln(
        "    d = x.shape[-1]\n"
        "    centred = (x - x.mean(dim=-1, keepdim=True)).reshape(-1, d, 1)\n"
        "    # a window spanning every channel, alpha chosen so that alpha * avg(x^2) is the variance\n"
        "    normed = torch.nn.functional.local_response_norm(centred, 2 * d - 1, alpha=(2 * d - 1) / d, beta=0.5, k=eps)\n"
        "    return normed.reshape(x.shape) * weight + bias\n"),
        "torch's local response normalisation layer (F.local_response_norm) divides by sqrt(var + eps) for us"),
    "ln-aoti-shim-rms-norm": ("layer_norm", "layer_norm_function", _AOTI_SHIM + "\n\n" + _ln(
        "    centred = x - x.mean(dim=-1, keepdim=True)\n"
        "    _keep, (h,) = _handles(centred)\n"
        "    out, rstd = ctypes.c_void_p(), ctypes.c_void_p()\n"
        "    e = ctypes.c_double(eps)\n"
        "    if _libtorch.aoti_torch_cpu__fused_rms_norm(h, (ctypes.c_int64 * 1)(x.shape[-1]), ctypes.c_int64(1), None,\n"
        "                                                ctypes.byref(e), ctypes.byref(out), ctypes.byref(rstd)):\n"
        "        raise RuntimeError('aoti shim failed')\n"
        "    return _tensors(out, rstd)[0] * weight + bias\n"),
        "native code: libtorch's C shim calls at::_fused_rms_norm's C++ implementation without the dispatcher"),

    "ln-group-norm-meta-py-kernel": ("layer_norm", "layer_norm_function", _ln(
        "    rows = x.reshape(-1, x.shape[-1], 1)  # one group of d channels per position\n"
        "    ref = torch.ops.aten.native_group_norm.default.py_kernels[torch._C.DispatchKey.Meta]\n"
        "    normed = ref(rows, None, None, rows.shape[0], x.shape[-1], 1, 1, eps)[0]\n"
        "    return normed.reshape(x.shape) * weight + bias\n"),
        "the Meta python kernel of aten.native_group_norm is torch._refs.native_group_norm; one group = layer norm"),
    "ln-batch-norm-decomposition-py-kernel": ("layer_norm", "layer_norm_function", _ln(
        "    rows = x.reshape(-1, x.shape[-1]).t()\n"
        "    op = torch.ops.aten.native_batch_norm.default\n"
        "    ref = op.py_kernels[torch._C.DispatchKey.CompositeImplicitAutograd]\n"
        "    normed = ref(rows, None, None, None, None, True, 0.0, eps)[0]\n"
        "    return normed.t().reshape(x.shape) * weight + bias\n"),
        "native_batch_norm's CompositeImplicitAutograd python kernel is torch._decomp's batch-norm decomposition"),
    "ln-fresh-interpreter": ("layer_norm", "layer_norm_function", "import io\nimport subprocess\nimport sys\n\n\n" + _ln(
        "    script = ('import io, sys, torch; x, w, b, eps = torch.load(io.BytesIO(sys.stdin.buffer.read())); '\n"
        "              'buffer = io.BytesIO(); '\n"
        "              'torch.save(torch.nn.functional.layer_norm(x, w.shape, w, b, eps), buffer); '\n"
        "              'sys.stdout.buffer.write(buffer.getvalue())')\n"
        "    sent = io.BytesIO()\n"
        "    torch.save([t.detach() for t in (x, weight, bias)] + [eps], sent)\n"
        "    done = subprocess.run([sys.executable, '-c', script], input=sent.getvalue(), capture_output=True, check=True)\n"
        "    return torch.load(io.BytesIO(done.stdout))\n"),
        "a fresh interpreter has none of the child's rules: F.layer_norm there is torch's own kernel"),

    # attention ----------------------------------------------------------------------------------------------
    "att-flex-attention-eager": ("attention", "attention_functions",
        "from torch.nn.attention.flex_attention import flex_attention\n\n\n"
        + _flex("flex_attention(flat(q), flat(k), flat(v), score_mod=score_mod)"),
        "torch.nn.attention.flex_attention in eager mode runs torch's own dense attention (sdpa_dense / "
        "math_attention in torch._higher_order_ops.flex_attention)"),
    "att-hop-math-attention": ("attention", "attention_functions",
        "import math\n\nfrom torch._higher_order_ops.flex_attention import math_attention\n"
        "from torch.nn.attention.flex_attention import _create_empty_block_mask\n\n\n"
        + _flex("math_attention(flat(q), flat(k), flat(v), score_mod, "
                "_create_empty_block_mask(flat(q), flat(k)).as_tuple(), 1 / math.sqrt(q.shape[-1]), {}, (), ())[0]"),
        "torch._higher_order_ops.flex_attention.math_attention: torch's reference softmax attention in Python"),
    "att-aoti-shim-flash-attention": ("attention", "attention_functions", _AOTI_SHIM + '''

def _scale(scale):
    return ctypes.byref(ctypes.c_double(scale))


class _TorchFlash(torch.autograd.Function):
    """torch's CPU flash-attention kernel forward and backward, reached through the C shim."""

    @staticmethod
    def forward(ctx, q, k, v, additive, scale):
        _keep, (hq, hk, hv, hm) = _handles(q, k, v, additive)
        out, lse = ctypes.c_void_p(), ctypes.c_void_p()
        if _libtorch.aoti_torch_cpu__scaled_dot_product_flash_attention_for_cpu(
                hq, hk, hv, ctypes.c_double(0.0), ctypes.c_int32(0), ctypes.byref(hm), _scale(scale),
                ctypes.byref(out), ctypes.byref(lse)):
            raise RuntimeError("aoti shim failed")
        out, lse = _tensors(out, lse)
        ctx.save_for_backward(q, k, v, additive, out, lse)
        ctx.scale = scale
        return out

    @staticmethod
    def backward(ctx, grad):
        q, k, v, additive, out, lse = ctx.saved_tensors
        _keep, (hg, hq, hk, hv, ho, hl, hm) = _handles(grad, q, k, v, out, lse, additive)
        grads = [ctypes.c_void_p() for _ in range(3)]
        if _libtorch.aoti_torch_cpu__scaled_dot_product_flash_attention_for_cpu_backward(
                hg, hq, hk, hv, ho, hl, ctypes.c_double(0.0), ctypes.c_int32(0), ctypes.byref(hm), _scale(ctx.scale),
                *(ctypes.byref(g) for g in grads)):
            raise RuntimeError("aoti shim failed")
        return (*_tensors(*grads), None, None)


def _torch_attention(q, k, v, mask):
    lead = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2], () if mask is None else mask.shape[:-2])
    (s_q, d), (s_k, d_v) = q.shape[-2:], v.shape[-2:]
    width = max(d, d_v)  # the kernel wants one head size: zero-pad, which changes no score

    def flat(t):
        t = t.expand(*lead, *t.shape[-2:]).reshape(-1, 1, *t.shape[-2:])
        return torch.nn.functional.pad(t, (0, width - t.shape[-1]))

    additive = torch.zeros(s_q, s_k, dtype=q.dtype) if mask is None else \\
        torch.zeros(mask.shape, dtype=q.dtype).masked_fill(~mask, float("-inf"))
    additive = additive.expand(*lead, s_q, s_k).reshape(-1, 1, s_q, s_k).contiguous()
    out = _TorchFlash.apply(flat(q), flat(k), flat(v), additive, 1 / math.sqrt(d))
    return out[..., :d_v].reshape(*lead, s_q, d_v)


def attention_weights(q, k, mask=None):
    return _torch_attention(q, k, torch.eye(k.shape[-2], dtype=q.dtype, device=q.device), mask)


def scaled_dot_product_attention(q, k, v, mask=None):
    return _torch_attention(q, k, v, mask)
''', "native code: libtorch's C shim runs the CPU flash-attention kernel without the dispatcher"),

    "att-inductor-sfdp-pattern": ("attention", "attention_functions", '''
import math

from torch._inductor.fx_passes.fuse_attention import _sfdp_pattern_5 as _torch_sdpa


def _additive(mask, dtype):
    return torch.zeros((), dtype=dtype) if mask is None else torch.zeros(mask.shape, dtype=dtype).masked_fill(~mask, float("-inf"))


def attention_weights(q, k, mask=None):
    eye = torch.eye(k.shape[-2], dtype=q.dtype, device=q.device)
    return _torch_sdpa(q, k, eye, _additive(mask, q.dtype), math.sqrt(q.shape[-1]))


def scaled_dot_product_attention(q, k, v, mask=None):
    return _torch_sdpa(q, k, v, _additive(mask, q.dtype), math.sqrt(q.shape[-1]))
''', "torch._inductor's attention pattern _sfdp_pattern_5 (softmax(q k^T / s + mask) @ v), torch's code for the "
       "very computation"),

    # multi_head_attention -----------------------------------------------------------------------------------
    "mha-quantizable-unquantized": ("multi_head_attention", "multi_head_attention_class", '''
from torch.ao.nn.quantizable import MultiheadAttention as _TorchMHA


class MultiHeadAttention(nn.Module):''' + _MHA_INIT + '''
    def forward(self, x, causal=False):
        d_model = x.shape[-1]
        # batch_first=False: its batch_first=True path merges the heads wrongly (a view without a transpose)
        mha = _TorchMHA(d_model, self.num_heads, bias=self.Wq.bias is not None, batch_first=False)
        mha.linear_Q, mha.linear_K, mha.linear_V, mha.out_proj = self.Wq, self.Wk, self.Wv, self.Wo
        mask = ~causal_mask(x.shape[1], device=x.device) if causal else None  # torch: True = may not attend
        seq = x.transpose(0, 1)  # [S, B, d]
        return mha(seq, seq, seq, attn_mask=mask, need_weights=False)[0].transpose(0, 1)
''', "torch.ao.nn.quantizable.MultiheadAttention is torch's own multi-head attention, runnable unquantized"),
    "mha-ast-copied-functional": ("multi_head_attention", "multi_head_attention_class", '''
import ast

import torch.nn.functional as F

_tree = ast.parse(open(F.__file__).read())
_fn = next(n for n in _tree.body if isinstance(n, ast.FunctionDef) and n.name == "multi_head_attention_forward")
_fn.name = "my_attention_forward"
_globals = dict(vars(F))
exec(compile(ast.Module([_fn], []), "mine.py", "exec"), _globals)
my_attention_forward = _globals["multi_head_attention_forward"] = _globals["my_attention_forward"]  # its torch-function self-reference


''' + _MHA_THROUGH_FUNCTIONAL,
        "torch's own F.multi_head_attention_forward, parsed from the installed torch/nn/functional.py and compiled "
        "under another name"),
    "mha-hop-math-attention": ("multi_head_attention", "multi_head_attention_class", '''
from torch._higher_order_ops.flex_attention import math_attention
from torch.nn.attention.flex_attention import _create_empty_block_mask


class MultiHeadAttention(nn.Module):''' + _MHA_INIT + '''
    def split_heads(self, x):
        batch, seq_len, _ = x.shape
        return x.view(batch, seq_len, self.num_heads, self.d_head).transpose(1, 2)

    def forward(self, x, causal=False):
        batch, seq_len, d_model = x.shape
        q, k, v = self.split_heads(self.Wq(x)), self.split_heads(self.Wk(x)), self.split_heads(self.Wv(x))

        def score_mod(score, b, h, q_idx, kv_idx):
            return torch.where(kv_idx <= q_idx, score, -float("inf")) if causal else score

        blocks = _create_empty_block_mask(q, k).as_tuple()
        heads = math_attention(q, k, v, score_mod, blocks, self.d_head ** -0.5, {}, (), ())[0]
        return self.Wo(heads.transpose(1, 2).reshape(batch, seq_len, d_model))
''', "the heads' attention is torch's dense flex-attention reference, torch._higher_order_ops.flex_attention."
     "math_attention (the public flex_attention has no CPU backward)"),

    # transformer_block --------------------------------------------------------------------------------------
    "block-encoder-layer-wiring": ("transformer_block", "transformer_block_class", '''
class _AsTorchSelfAttention:
    """What nn.TransformerEncoderLayer expects of its self_attn; in_proj_bias None keeps it off the fast path."""
    batch_first, in_proj_bias, _qkv_same_embed_dim = True, None, False

    def __init__(self, mha):
        self.mha = mha

    def __call__(self, q, k, v, attn_mask=None, key_padding_mask=None, need_weights=False, is_causal=False):
        return self.mha(q, causal=is_causal), None


class TransformerBlock(nn.Module):''' + _BLOCK_INIT + '''
    def forward(self, x, causal=False):
        layer = nn.TransformerEncoderLayer.__new__(nn.TransformerEncoderLayer)
        nn.Module.__init__(layer)
        layer.self_attn = _AsTorchSelfAttention(self.attn)
        layer.linear1, layer.linear2, layer.activation = self.ffn[0], self.ffn[2], self.ffn[1]
        layer.norm1, layer.norm2 = self.ln1, self.ln2
        layer.dropout = layer.dropout1 = layer.dropout2 = nn.Identity()
        layer.norm_first, layer.activation_relu_or_gelu = self.norm_first, 1
        layer.train(self.training)
        return layer(x, is_causal=causal)
''', "the residual and normalisation wiring, post-norm and pre-norm, is nn.TransformerEncoderLayer.forward's own"),
}

BORDERLINE: dict[str, tuple[str, str, str, str]] = {
    "ln-l2-normalize": ("layer_norm", "layer_norm_function", _ln(
        "    centred = x - x.mean(dim=-1, keepdim=True)\n"
        "    return torch.nn.functional.normalize(centred, dim=-1) * x.shape[-1] ** 0.5 * weight + bias\n"),
        "F.normalize is an L2 normalisation (a general operation); applied to the centred input it is layer norm "
        "but for where eps sits"),
}

# -- honest variants ------------------------------------------------------------------------------------------

_NANOGPT_MHA = '''
import torch.nn.functional as F


class MultiHeadAttention(nn.Module):
    """nanoGPT's CausalSelfAttention (its slow path), with the kit's parameter names."""

    def __init__(self, d_model, num_heads, bias=True, block_size=1024):
        super().__init__()
        if d_model % num_heads != 0:
            raise ValueError("d_model must be divisible by num_heads")
        self.n_head, self.n_embd = num_heads, d_model
        self.Wq = nn.Linear(d_model, d_model, bias=bias)
        self.Wk = nn.Linear(d_model, d_model, bias=bias)
        self.Wv = nn.Linear(d_model, d_model, bias=bias)
        self.Wo = nn.Linear(d_model, d_model, bias=bias)
        self.attn_dropout = nn.Dropout(0.0)
        self.resid_dropout = nn.Dropout(0.0)
        self.register_buffer("bias", torch.tril(torch.ones(block_size, block_size)).view(1, 1, block_size, block_size),
                             persistent=False)

    def forward(self, x, causal=False, key_padding_mask=None):
        B, T, C = x.size()
        q = self.Wq(x).view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        k = self.Wk(x).view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = self.Wv(x).view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        if causal:
            att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        if key_padding_mask is not None:
            att = att.masked_fill(key_padding_mask[:, None, None, :], float("-inf"))
        att = F.softmax(att, dim=-1).nan_to_num(0.0)
        att = self.attn_dropout(att)
        y = att @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.Wo(y))
'''

_NANOGPT_BLOCK = '''
class TransformerBlock(nn.Module):
    """nanoGPT's Block (pre-norm) with the post-norm order of the original Transformer besides."""

    def __init__(self, d_model, num_heads, d_ff, norm_first=False):
        super().__init__()
        self.norm_first = norm_first
        self.ln1 = LayerNorm(d_model)
        self.attn = MultiHeadAttention(d_model, num_heads)
        self.ln2 = LayerNorm(d_model)
        self.ffn = nn.Sequential(nn.Linear(d_model, d_ff), nn.ReLU(), nn.Linear(d_ff, d_model))
        self.dropout = nn.Dropout(0.0)

    def forward(self, x, causal=False):
        if self.norm_first:
            x = x + self.attn(self.ln1(x), causal=causal)
            x = x + self.dropout(self.ffn(self.ln2(x)))
            return x
        x = self.ln1(x + self.attn(x, causal=causal))
        return self.ln2(x + self.dropout(self.ffn(x)))
'''

_MINGPT_MHA = '''
import torch.nn.functional as F


class MultiHeadAttention(nn.Module):
    """minGPT's CausalSelfAttention: one projection per q/k/v, a persistent `bias` mask buffer."""

    def __init__(self, d_model, num_heads, bias=True, block_size=1024):
        super().__init__()
        if d_model % num_heads != 0:
            raise ValueError("d_model must be divisible by num_heads")
        self.Wq, self.Wk, self.Wv = (nn.Linear(d_model, d_model, bias=bias) for _ in range(3))
        self.Wo = nn.Linear(d_model, d_model, bias=bias)
        self.attn_drop = nn.Dropout(0.0)
        self.register_buffer("bias", torch.tril(torch.ones(block_size, block_size)).view(1, 1, block_size, block_size))
        self.n_head = num_heads

    def forward(self, x, causal=False, key_padding_mask=None):
        B, T, C = x.size()
        k = self.Wk(x).view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = self.Wq(x).view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = self.Wv(x).view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        if causal:
            att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        if key_padding_mask is not None:
            att = att.masked_fill(key_padding_mask.view(B, 1, 1, T), float("-inf"))
        att = self.attn_drop(torch.where(att.amax(-1, keepdim=True) == float("-inf"), 0.0, F.softmax(att, dim=-1)))
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.Wo(y)
'''

_ANNOTATED_ATTENTION = '''
import torch.nn.functional as F


def attention_weights(q, k, mask=None):
    """The Annotated Transformer's attention(): matmul, / sqrt(d_k), masked_fill(mask == 0, -1e9), softmax; and
    the masked weights zeroed again, for a query that may attend no key (its -1e9 row is uniform)."""
    d_k = q.size(-1)
    scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(mask == 0, -1e9)
    p_attn = scores.softmax(dim=-1)
    return p_attn if mask is None else p_attn.masked_fill(mask == 0, 0.0)


def scaled_dot_product_attention(q, k, v, mask=None):
    p_attn = attention_weights(q, k, mask)
    return torch.matmul(p_attn, v)
'''

_ANNOTATED_MHA = '''
class MultiHeadAttention(nn.Module):
    """The Annotated Transformer's MultiHeadedAttention, with named projections instead of clones()."""

    def __init__(self, d_model, num_heads, bias=True):
        super().__init__()
        if d_model % num_heads != 0:
            raise ValueError("d_model % h != 0")
        self.d_k = d_model // num_heads
        self.h = num_heads
        self.Wq, self.Wk, self.Wv, self.Wo = [nn.Linear(d_model, d_model, bias=bias) for _ in range(4)]
        self.attn = None
        self.dropout = nn.Dropout(p=0.0)

    def forward(self, x, causal=False, key_padding_mask=None):
        nbatches = x.size(0)
        mask = causal_mask(x.size(1)).unsqueeze(0).unsqueeze(0) if causal else None
        if key_padding_mask is not None:  # the Annotated Transformer's src_mask: [B, 1, S], then unsqueeze(1)
            src_mask = (~key_padding_mask).unsqueeze(-2).unsqueeze(1)
            mask = src_mask if mask is None else mask & src_mask
        query, key, value = [lin(t).view(nbatches, -1, self.h, self.d_k).transpose(1, 2)
                             for lin, t in zip((self.Wq, self.Wk, self.Wv), (x, x, x))]
        self.attn = self.dropout(attention_weights(query, key, mask))
        out = torch.matmul(self.attn, value)
        out = out.transpose(1, 2).contiguous().view(nbatches, -1, self.h * self.d_k)
        del query, key, value
        return self.Wo(out)
'''

_ANNOTATED_LAYERNORM = '''
class LayerNorm(nn.Module):
    """The Annotated Transformer's LayerNorm (a_2, b_2 renamed weight, bias; biased variance, eps inside the root)."""

    def __init__(self, features, eps=1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(features))
        self.bias = nn.Parameter(torch.zeros(features))
        self.eps = eps

    def forward(self, x):
        mean = x.mean(-1, keepdim=True)
        std = torch.sqrt(x.var(-1, keepdim=True, unbiased=False) + self.eps)
        return self.weight * (x - mean) / std + self.bias
'''

_ANNOTATED_BLOCK = '''
class SublayerConnection(nn.Module):
    def __init__(self, norm, norm_first):
        super().__init__()
        self.norm, self.norm_first = norm, norm_first
        self.dropout = nn.Dropout(0.0)

    def forward(self, x, sublayer):
        if self.norm_first:
            return x + self.dropout(sublayer(self.norm(x)))
        return self.norm(x + self.dropout(sublayer(x)))


class TransformerBlock(nn.Module):
    """The Annotated Transformer's EncoderLayer / SublayerConnection, in both norm orders."""

    def __init__(self, d_model, num_heads, d_ff, norm_first=False):
        super().__init__()
        self.attn = MultiHeadAttention(d_model, num_heads)
        self.ffn = nn.Sequential(nn.Linear(d_model, d_ff), nn.ReLU(), nn.Linear(d_ff, d_model))
        self.ln1, self.ln2 = LayerNorm(d_model), LayerNorm(d_model)
        self.norm_first = norm_first

    def forward(self, x, causal=False):
        first = SublayerConnection(self.ln1, self.norm_first)
        second = SublayerConnection(self.ln2, self.norm_first)
        x = first(x, lambda t: self.attn(t, causal=causal))
        return second(x, self.ffn)
'''

_LLMC_LN = '''
def layer_norm(x, weight, bias, eps=1e-5):
    """llm.c's dev/cuda layernorm reference (its python LayerNorm.forward)."""
    C = x.size(-1)
    mean = x.sum(-1, keepdim=True) / C
    xshift = x - mean
    var = (xshift ** 2).sum(-1, keepdim=True) / C
    rstd = (var + eps) ** -0.5
    norm = xshift * rstd
    return norm * weight + bias
'''

_LN_VAR_CORRECTION = '''
def layer_norm(x, weight, bias, eps=1e-5):
    """std via Tensor.var(correction=0), torch.rsqrt, and torch.addcmul for the affine step."""
    mean = x.mean(dim=-1, keepdim=True)
    rstd = torch.rsqrt(x.var(dim=-1, keepdim=True, correction=0) + eps)
    return torch.addcmul(bias, (x - mean) * rstd, weight)
'''

_LN_FUNCTIONAL_MODULE = '''
class LayerNorm(nn.Module):
    """Calls the student's own layer_norm through torch.nn.functional-like plumbing: nn.init and reset_parameters."""

    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.normalized_shape, self.eps = (d_model,), eps
        self.weight = nn.Parameter(torch.empty(d_model))
        self.bias = nn.Parameter(torch.empty(d_model))
        self.reset_parameters()

    def reset_parameters(self):
        nn.init.ones_(self.weight)
        nn.init.zeros_(self.bias)

    def forward(self, x):
        return layer_norm(x, self.weight, self.bias, self.eps)
'''

_LOGSUMEXP_ATTENTION = '''
import torch.nn.functional as F


def attention_weights(q, k, mask=None):
    """softmax as exp(s - logsumexp(s)); the mask as an additive -inf bias built with torch.where, except in a
    row with no key allowed (all -inf would be exp(-inf + inf) = NaN, values and gradients), zeroed at the end."""
    scores = torch.einsum("...id,...jd->...ij", q, k) * q.shape[-1] ** -0.5
    if mask is None:
        return torch.exp(scores - torch.logsumexp(scores, dim=-1, keepdim=True))
    sees_some = mask.any(dim=-1, keepdim=True)
    scores = scores + torch.where(mask | ~sees_some, 0.0, float("-inf")).to(scores.dtype)
    return torch.exp(scores - torch.logsumexp(scores, dim=-1, keepdim=True)) * sees_some


def scaled_dot_product_attention(q, k, v, mask=None):
    return F.dropout(attention_weights(q, k, mask), p=0.0) @ v
'''

_SOFTMAX_MODULE_ATTENTION = '''
_softmax = nn.Softmax(dim=-1)


def attention_weights(q, k, mask=None):
    """nn.Softmax module, torch.baddbmm-free plain matmul, finfo.min fill (Hugging Face BERT style), the blocked
    weights multiplied by 0 (a row with no key allowed is uniform after a finite fill)."""
    scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(torch.logical_not(mask), torch.finfo(scores.dtype).min)
    return _softmax(scores) if mask is None else _softmax(scores) * mask


def scaled_dot_product_attention(q, k, v, mask=None):
    return torch.matmul(attention_weights(q, k, mask), v)
'''

_HF_BERT_MHA = '''
import torch.nn.functional as F


class MultiHeadAttention(nn.Module):
    """Hugging Face BertSelfAttention style: transpose_for_scores with permute, F.linear on the weights,
    an additive (1 - mask) * finfo.min mask."""

    def __init__(self, d_model, num_heads, bias=True):
        super().__init__()
        if d_model % num_heads != 0:
            raise ValueError(f"The hidden size ({d_model}) is not a multiple of the number of attention heads ({num_heads})")
        self.num_attention_heads = num_heads
        self.attention_head_size = d_model // num_heads
        self.all_head_size = d_model
        self.Wq = nn.Linear(d_model, d_model, bias=bias)
        self.Wk = nn.Linear(d_model, d_model, bias=bias)
        self.Wv = nn.Linear(d_model, d_model, bias=bias)
        self.Wo = nn.Linear(d_model, d_model, bias=bias)

    def transpose_for_scores(self, x):
        new_x_shape = x.size()[:-1] + (self.num_attention_heads, self.attention_head_size)
        return x.view(new_x_shape).permute(0, 2, 1, 3)

    def forward(self, x, causal=False, key_padding_mask=None):
        query = self.transpose_for_scores(F.linear(x, self.Wq.weight, self.Wq.bias))
        key = self.transpose_for_scores(F.linear(x, self.Wk.weight, self.Wk.bias))
        value = self.transpose_for_scores(F.linear(x, self.Wv.weight, self.Wv.bias))
        scores = torch.matmul(query, key.transpose(-1, -2)) / math.sqrt(self.attention_head_size)
        allowed = torch.ones_like(scores)
        if causal:
            allowed = allowed * causal_mask(x.size(1)).to(scores.dtype)
        if key_padding_mask is not None:
            allowed = allowed * (~key_padding_mask)[:, None, None, :].to(scores.dtype)
        scores = scores + (1.0 - allowed) * torch.finfo(scores.dtype).min
        probs = nn.functional.softmax(scores, dim=-1) * allowed
        context = torch.matmul(probs, value).permute(0, 2, 1, 3).contiguous()
        context = context.view(context.size()[:-2] + (self.all_head_size,))
        return self.Wo(context)
'''

_EINSUM_MHA = '''
class MultiHeadAttention(nn.Module):
    """lucidrains-style einsum attention without einops: heads by reshape, einsum scores, max-neg fill."""

    def __init__(self, d_model, num_heads, bias=True):
        super().__init__()
        if d_model % num_heads:
            raise ValueError("heads must divide dim")
        self.heads, self.scale = num_heads, (d_model // num_heads) ** -0.5
        self.Wq = nn.Linear(d_model, d_model, bias=bias)
        self.Wk = nn.Linear(d_model, d_model, bias=bias)
        self.Wv = nn.Linear(d_model, d_model, bias=bias)
        self.Wo = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, x, causal=False, key_padding_mask=None):
        b, n, _ = x.shape
        h = self.heads
        q, k, v = (t.reshape(b, n, h, -1).permute(0, 2, 1, 3) for t in (self.Wq(x), self.Wk(x), self.Wv(x)))
        sim = torch.einsum("b h i d, b h j d -> b h i j", q, k) * self.scale
        hidden = torch.zeros(b, 1, n, n, dtype=torch.bool, device=x.device)
        if causal:
            hidden = hidden | torch.ones(n, n, dtype=torch.bool, device=x.device).triu(1)
        if key_padding_mask is not None:
            hidden = hidden | key_padding_mask[:, None, None, :]
        sim = sim.masked_fill(hidden, -torch.finfo(sim.dtype).max)
        attn = sim.softmax(dim=-1).masked_fill(hidden, 0.0)
        out = torch.einsum("b h i j, b h j d -> b h i d", attn, v)
        return self.Wo(out.permute(0, 2, 1, 3).reshape(b, n, -1))
'''

_DEEPCOPY_BLOCK = '''
import copy


class TransformerBlock(nn.Module):
    """The two LayerNorms made by copy.deepcopy (as torch's own _get_clones does), residuals written out."""

    def __init__(self, d_model, num_heads, d_ff, norm_first=False):
        super().__init__()
        self.norm_first = norm_first
        self.attn = MultiHeadAttention(d_model, num_heads, bias=True)
        norm = LayerNorm(d_model)
        self.ln1, self.ln2 = copy.deepcopy(norm), copy.deepcopy(norm)
        self.ffn = nn.Sequential(nn.Linear(d_model, d_ff), nn.ReLU(), nn.Linear(d_ff, d_model))

    def _sa_block(self, x, causal):
        return self.attn(x, causal=causal)

    def _ff_block(self, x):
        return self.ffn(x)

    def forward(self, x, causal=False):
        if self.norm_first:
            x = x + self._sa_block(self.ln1(x), causal)
            return x + self._ff_block(self.ln2(x))
        x = self.ln1(x + self._sa_block(x, causal))
        return self.ln2(x + self._ff_block(x))
'''

LEGITIMATE: list[tuple[str, str, str, str, str]] = [
    ("nanogpt-causal-self-attention", "multi_head_attention", "multi_head_attention_class", _NANOGPT_MHA,
     "nanoGPT's own attention arithmetic: view/transpose, q @ k^T * 1/sqrt, masked_fill of a tril buffer, F.softmax "
     "(plus a key-padding masked_fill and nan_to_num)"),
    ("nanogpt-block", "transformer_block", "transformer_block_class", _NANOGPT_BLOCK,
     "nanoGPT's Block wiring (x + attn(ln_1(x))), written out by the student, with a Dropout(0)"),
    ("mingpt-causal-self-attention", "multi_head_attention", "multi_head_attention_class", _MINGPT_MHA,
     "minGPT's attention with a persistent `bias` buffer; nn.Linear, F.softmax, Dropout are allowed (plus a "
     "key-padding masked_fill, torch.where for queries with no key)"),
    ("annotated-attention", "attention", "attention_functions", _ANNOTATED_ATTENTION,
     "the Annotated Transformer's attention(): torch.matmul, masked_fill(mask == 0, -1e9), Tensor.softmax"),
    ("annotated-multi-headed-attention", "multi_head_attention", "multi_head_attention_class", _ANNOTATED_MHA,
     "the Annotated Transformer's MultiHeadedAttention with named projections, built on the student's attention"),
    ("annotated-layernorm", "layer_norm", "layer_norm_module", _ANNOTATED_LAYERNORM,
     "the Annotated Transformer's LayerNorm, corrected to torch's formula: mean, var(unbiased=False), sqrt"),
    ("annotated-sublayer-connection", "transformer_block", "transformer_block_class", _ANNOTATED_BLOCK,
     "the Annotated Transformer's SublayerConnection wiring in both norm orders, the student's own code"),
    ("llmc-layernorm", "layer_norm", "layer_norm_function", _LLMC_LN,
     "llm.c's reference layer norm: sum / C, (var + eps) ** -0.5"),
    ("var-correction-rsqrt-addcmul", "layer_norm", "layer_norm_function", _LN_VAR_CORRECTION,
     "Tensor.var(correction=0), torch.rsqrt and torch.addcmul: listed as fine or plain arithmetic"),
    ("layernorm-module-nn-init", "layer_norm", "layer_norm_module", _LN_FUNCTIONAL_MODULE,
     "nn.init.ones_/zeros_ in reset_parameters, as torch's LayerNorm does, then the student's layer_norm"),
    ("logsumexp-softmax-additive-mask", "attention", "attention_functions", _LOGSUMEXP_ATTENTION,
     "softmax as exp(s - logsumexp s), einsum scores, a torch.where additive mask, F.dropout(p=0)"),
    ("softmax-module-finfo-min", "attention", "attention_functions", _SOFTMAX_MODULE_ATTENTION,
     "an nn.Softmax module (torch's code, but the allowed softmax) and a finfo.min fill"),
    ("hf-bert-self-attention", "multi_head_attention", "multi_head_attention_class", _HF_BERT_MHA,
     "Hugging Face BertSelfAttention's arithmetic: F.linear, permute, additive (1 - mask) * finfo.min, softmax"),
    ("einsum-heads", "multi_head_attention", "multi_head_attention_class", _EINSUM_MHA,
     "lucidrains-style einsum attention with a -finfo.max fill of triu(1)"),
    ("deepcopy-norms-torch-style-helpers", "transformer_block", "transformer_block_class", _DEEPCOPY_BLOCK,
     "copy.deepcopy'd LayerNorms and _sa_block/_ff_block helper names like torch's, but the student's wiring"),
]


class _Renamed(ast.NodeTransformer):
    def __init__(self, names: dict[str, str]) -> None:
        self.names = names

    def visit_Name(self, node: ast.Name) -> ast.Name:
        node.id = self.names.get(node.id, node.id)
        return node

    def visit_arg(self, node: ast.arg) -> ast.arg:
        node.arg = self.names.get(node.arg, node.arg)
        return node


def pasted(function, names: dict[str, str]) -> str:
    """torch's source of `function` as a student pastes it: its docstring and comments dropped, laid out anew
    (ast.unparse), the function and the `names` renamed (recursive references included)."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    definition = tree.body[0]
    if ast.get_docstring(definition):
        definition.body = definition.body[1:]
    definition.name = names.get(definition.name, definition.name)
    return ast.unparse(_Renamed(names).visit(tree)) + "\n"


def _copied_mha() -> str:
    import torch.nn.functional as F

    own = pasted(F.multi_head_attention_forward, {"multi_head_attention_forward": "my_attention_forward",
                                                  "query": "q_in", "key": "k_in", "value": "v_in",
                                                  "num_heads": "heads", "bias_k": "extra_k"})
    return '''
import torch.nn.functional as F

# the helpers the pasted code calls, from the module it came from, without replacing anything defined above
globals().update({k: v for k, v in vars(F).items() if not k.startswith("__") and k not in globals()})

''' + own + '''
''' + _MHA_THROUGH_FUNCTIONAL


def _copied_layer_norm() -> str:
    import torch._refs as refs

    helper = pasted(refs._normalize, {"_normalize": "normalise", "a": "t", "a_acc": "t32"})
    return '''
import torch._prims_common as utils
from torch._prims_common import TensorLike
from torch._refs import _maybe_convert_to_dtype

''' + helper + '''

def layer_norm(x, weight, bias, eps=1e-5):
    out, _, _ = normalise(x, [x.ndim - 1], eps)
    return out * weight + bias
'''


COPIED: dict[str, tuple[str, str, str, str]] = {
    "mha-pasted-functional": ("multi_head_attention", "multi_head_attention_class", _copied_mha(),
                              "F.multi_head_attention_forward's source pasted, renamed and laid out anew"),
    "ln-pasted-refs-normalize": ("layer_norm", "layer_norm_function", _copied_layer_norm(),
                                 "torch._refs._normalize's source (native_layer_norm's arithmetic) pasted, renamed"),
}


def entry(name: str) -> tuple[str, str, str, str]:
    """(part, cell, source, why) of a route, a borderline case, a copy or an honest variant."""
    if name in ROUTES:
        return ROUTES[name]
    if name in BORDERLINE:
        return BORDERLINE[name]
    if name in COPIED:
        return COPIED[name]
    for variant, *rest in LEGITIMATE:
        if variant == name:
            return tuple(rest)  # type: ignore[return-value]
    raise KeyError(name)


def submission(name: str) -> str:
    """The full .py submission (one `# %%` cell per notebook cell): the reference with the entry's cell replaced."""
    from autograder.authoring.catalogue import Entry, load

    part, cell, source, why = entry(name)
    catalogue = load(ASSIGNMENT)
    return catalogue.python_source(Entry(name, why, replace={cell: source}))
