"""Correct-but-different submissions: each must get full marks.  Mostly whole solution cells written another
legitimate way (see the package docstring for the format); the contract they respect is the one in the
suites' and the notebook's docstrings (names and signatures; parameters Wq/Wk/Wv/Wo without bias, tok_emb,
blocks.{i}.{ln1, attn, ln2, ffn.0, ffn.2}, ln_f, a head tied to tok_emb.weight; buffers of any kind besides;
interleaved RoPE pairs; a list of Python floats from train_toy_model)."""
from __future__ import annotations

from autograder.authoring.catalogue import Entry, M

ROPE_COMPLEX = '''
def apply_rope(x, positions, base=10000.0):
    """Pairs as complex numbers, rotated by multiplying with exp(i * angle)."""
    d = x.shape[-1]
    freqs = 1.0 / (base ** (torch.arange(0, d, 2, dtype=x.dtype) / d))
    angles = torch.outer(positions.to(x.dtype), freqs)
    pairs = torch.view_as_complex(x.reshape(*x.shape[:-1], d // 2, 2).contiguous())
    return torch.view_as_real(pairs * torch.polar(torch.ones_like(angles), angles)).flatten(-2)
'''

ROPE_SLICE_ASSIGN = '''
def apply_rope(x: torch.Tensor, positions: torch.Tensor, base: float = 10000.0) -> torch.Tensor:
    """cos/sin tables repeated to full width and written back with slice assignment."""
    d = x.shape[-1]
    theta = torch.pow(torch.tensor(base, dtype=x.dtype), -torch.arange(0, d, 2, dtype=x.dtype) / d)
    angle = positions[:, None].to(x.dtype) * theta[None, :]
    cos, sin = angle.cos(), angle.sin()
    out = torch.empty_like(x)
    out[..., 0::2] = x[..., 0::2] * cos - x[..., 1::2] * sin
    out[..., 1::2] = x[..., 1::2] * cos + x[..., 0::2] * sin
    return out
'''

ROPE_MATRIX_EINSUM = '''
def apply_rope(x, positions, base=10000.0):
    """An explicit 2x2 rotation matrix per position and pair, applied with einsum."""
    d = x.shape[-1]
    inv_freq = base ** (-torch.arange(d // 2, dtype=x.dtype) * 2 / d)
    angle = positions.to(x.dtype).unsqueeze(-1) * inv_freq              # [seq, d/2]
    c, s = torch.cos(angle), torch.sin(angle)
    rotation = torch.stack((torch.stack((c, -s), -1), torch.stack((s, c), -1)), -2)  # [seq, d/2, 2, 2]
    pairs = x.unflatten(-1, (d // 2, 2))                                 # [..., seq, d/2, 2]
    return torch.einsum("spij,...spj->...spi", rotation, pairs).flatten(-2)
'''

ROPE_FLOAT64_ANGLES = '''
def apply_rope(x, positions, base=10000.0):
    """Angles, cos and sin always computed in float64, then cast to x's dtype."""
    d = x.shape[-1]
    angles = positions.double()[:, None] * base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    a, b = x[..., ::2], x[..., 1::2]
    return torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).reshape(x.shape)
'''

KV_CAT = '''
class KVCache(nn.Module):
    """Grows with torch.cat instead of preallocating; the same return values (max_len is not needed)."""

    def __init__(self, batch_size, max_len, num_heads, head_dim):
        super().__init__()
        self.register_buffer("k_cache", torch.zeros(batch_size, num_heads, 0, head_dim), persistent=False)
        self.register_buffer("v_cache", torch.zeros(batch_size, num_heads, 0, head_dim), persistent=False)

    def forward(self, k, v, start_pos):
        self.k_cache = torch.cat([self.k_cache[:, :, :start_pos], k], dim=2)
        self.v_cache = torch.cat([self.v_cache[:, :, :start_pos], v], dim=2)
        return self.k_cache, self.v_cache
'''

KV_INDEX_COPY = '''
class KVCache(nn.Module):
    def __init__(self, batch_size: int, max_len: int, num_heads: int, head_dim: int) -> None:
        super().__init__()
        self.register_buffer("k_cache", torch.zeros(batch_size, num_heads, max_len, head_dim), persistent=False)
        self.register_buffer("v_cache", torch.zeros(batch_size, num_heads, max_len, head_dim), persistent=False)

    def forward(self, k, v, start_pos):
        """index_copy_ along the position dimension, under no_grad (the cache is not trained)."""
        idx = torch.arange(start_pos, start_pos + k.shape[2], device=k.device)
        with torch.no_grad():
            self.k_cache.index_copy_(2, idx, k)
            self.v_cache.index_copy_(2, idx, v)
        end = start_pos + k.shape[2]
        return self.k_cache.narrow(2, 0, end), self.v_cache.narrow(2, 0, end)
'''


def _attention(forward: str, init_extra: str = "") -> str:
    return f'''
class CausalSelfAttention(nn.Module):
    def __init__(self, d_model, num_heads, max_len):
        super().__init__()
        assert d_model % num_heads == 0
        self.h, self.dh, self.max_len = num_heads, d_model // num_heads, max_len
        self.Wq = nn.Linear(d_model, d_model, bias=False)
        self.Wk = nn.Linear(d_model, d_model, bias=False)
        self.Wv = nn.Linear(d_model, d_model, bias=False)
        self.Wo = nn.Linear(d_model, d_model, bias=False)
        self.cache = None{init_extra}

    def split(self, z):
        b, t, _ = z.shape
        return z.unflatten(-1, (self.h, self.dh)).transpose(1, 2)

{forward}
'''


ATT_EINSUM_FINFO = _attention('''    def forward(self, x, start_pos=0, use_cache=False):
        """einsum scores, tril(diagonal=...) rectangle, masked_fill with finfo.min."""
        b, t, d = x.shape
        pos = torch.arange(start_pos, start_pos + t)
        q, k, v = self.split(self.Wq(x)), self.split(self.Wk(x)), self.split(self.Wv(x))
        q, k = apply_rope(q, pos), apply_rope(k, pos)
        if use_cache:
            if start_pos == 0:
                self.cache = KVCache(b, self.max_len, self.h, self.dh).to(x)
            k, v = self.cache(k, v, start_pos)
        s = k.shape[2]
        scores = torch.einsum("bhqd,bhkd->bhqk", q, k) * self.dh ** -0.5
        allowed = torch.ones(t, s, dtype=torch.bool).tril(diagonal=s - t)
        scores = scores.masked_fill(~allowed, torch.finfo(scores.dtype).min)
        out = torch.einsum("bhqk,bhkd->bhqd", scores.softmax(dim=-1), v)
        return self.Wo(out.transpose(1, 2).flatten(2))''')

ATT_WHERE_LLAMA = _attention('''    def forward(self, x, start_pos=0, use_cache=False):
        """LLaMA style: a mask only when several queries are processed at once, torch.where with -inf."""
        b, t, d = x.shape
        pos = torch.arange(start_pos, start_pos + t)
        q = apply_rope(self.split(self.Wq(x)), pos)
        k = apply_rope(self.split(self.Wk(x)), pos)
        v = self.split(self.Wv(x))
        if use_cache:
            if start_pos == 0:
                self.cache = KVCache(b, self.max_len, self.h, self.dh).to(device=x.device, dtype=x.dtype)
            k, v = self.cache(k, v, start_pos)
        scores = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(self.dh)
        if t > 1:
            s = k.shape[2]
            blocked = torch.triu(torch.ones(t, s, dtype=torch.bool), diagonal=s - t + 1)
            scores = torch.where(blocked, torch.tensor(float("-inf"), dtype=scores.dtype), scores)
        probs = F.softmax(scores.float() if scores.dtype == torch.float16 else scores, dim=-1).type_as(q)
        return self.Wo(torch.matmul(probs, v).transpose(1, 2).contiguous().view(b, t, d))''')

ATT_ROTATE_AT_READ = _attention('''    def forward(self, x, start_pos=0, use_cache=False):
        """The cache keeps UN-rotated keys; all keys are rotated at their absolute positions when read."""
        b, t, d = x.shape
        q, k, v = self.split(self.Wq(x)), self.split(self.Wk(x)), self.split(self.Wv(x))
        if use_cache:
            if start_pos == 0:
                self.cache = KVCache(b, self.max_len, self.h, self.dh).to(x.device, x.dtype)
            k, v = self.cache(k, v, start_pos)
        s = k.shape[2]
        key_pos = torch.arange(start_pos + t - s, start_pos + t)
        query_pos = torch.arange(start_pos, start_pos + t)
        q, k = apply_rope(q, query_pos), apply_rope(k, key_pos)
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(self.dh)
        scores = scores.masked_fill(key_pos[None, :] > query_pos[:, None], float("-inf"))
        return self.Wo((scores.softmax(-1) @ v).transpose(1, 2).reshape(b, t, d))''')

ATT_FUSED_QKV_FLOAT64 = _attention('''    def forward(self, x, start_pos=0, use_cache=False):
        """One fused projection from the three weights; the attention itself in float64, cast back."""
        b, t, d = x.shape
        qkv = F.linear(x, torch.cat([self.Wq.weight, self.Wk.weight, self.Wv.weight]))
        q, k, v = (self.split(z) for z in qkv.split(d, dim=-1))
        pos = torch.arange(start_pos, start_pos + t)
        q, k = apply_rope(q, pos), apply_rope(k, pos)
        if use_cache:
            if start_pos == 0 or self.cache is None:
                self.cache = KVCache(b, self.max_len, self.h, self.dh).to(x.device, x.dtype)
            k, v = self.cache(k, v, start_pos)
        key_pos = torch.arange(k.shape[2]) + (start_pos + t - k.shape[2])
        att = (q.double() @ k.double().transpose(-2, -1)) / math.sqrt(self.dh)
        att = att.masked_fill(key_pos.view(1, -1) > pos.view(-1, 1), float("-inf"))
        out = (att.softmax(dim=-1) @ v.double()).to(x.dtype)
        return self.Wo(out.permute(0, 2, 1, 3).reshape(b, t, d))''')

BLOCK_HELPERS = '''
class Block(nn.Module):
    """Pre-norm block with one helper per sublayer and keyword-only cache arguments."""

    def __init__(self, d_model, num_heads, d_ff, max_len):
        super().__init__()
        self.ln1, self.attn = nn.LayerNorm(d_model), CausalSelfAttention(d_model, num_heads, max_len)
        self.ln2 = nn.LayerNorm(d_model)
        self.ffn = nn.Sequential(nn.Linear(d_model, d_ff), nn.GELU(), nn.Linear(d_ff, d_model))

    def _sa(self, x, start_pos, use_cache):
        return self.attn(self.ln1(x), start_pos=start_pos, use_cache=use_cache)

    def forward(self, x, start_pos=0, use_cache=False):
        h = x + self._sa(x, start_pos, use_cache)
        return h + self.ffn(self.ln2(h))
'''

GPT_TIED_OTHER_WAY = '''
class GPT(nn.Module):
    """Ties the other way round (the embedding takes the head's Parameter) and computes the logits with a
    matmul against the embedding matrix; the head module still exists and is the same weight."""

    def __init__(self, vocab_size, d_model, num_heads, d_ff, n_layers, max_len):
        super().__init__()
        self.tok_emb = nn.Embedding(vocab_size, d_model)
        self.blocks = nn.ModuleList(Block(d_model, num_heads, d_ff, max_len) for _ in range(n_layers))
        self.ln_f = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size, bias=False)
        self.tok_emb.weight = self.head.weight
        with torch.no_grad():
            self.tok_emb.weight.normal_(0.0, d_model ** -0.5)

    def forward(self, tokens, start_pos=0, use_cache=False):
        h = self.tok_emb(tokens)
        for i in range(len(self.blocks)):
            h = self.blocks[i](h, start_pos, use_cache)
        return self.ln_f(h) @ self.tok_emb.weight.T
'''

GEN_PROMPT_TOKEN_BY_TOKEN = '''
def generate(model, prompt, max_new_tokens):
    """No big prefill: the prompt goes through the cache one token at a time too; output preallocated."""
    batch, length = prompt.shape
    out = torch.empty(batch, length + max_new_tokens, dtype=torch.long)
    out[:, :length] = prompt
    with torch.inference_mode():
        for pos in range(length + max_new_tokens - 1):
            logits = model(out[:, pos:pos + 1], start_pos=pos, use_cache=True)
            if pos >= length - 1:
                out[:, pos + 1] = logits[:, -1].argmax(-1)
    return out
'''

GEN_RECOMPUTE = '''
def generate(model, prompt, max_new_tokens):
    """Recomputes the whole sequence at every step, without the cache: slower, but the same tokens (the
    suite cannot tell it from outputs; the notebook asks for the cache)."""
    tokens = prompt.clone()
    for _ in range(max_new_tokens):
        with torch.no_grad():
            logits = model(tokens)
        tokens = torch.cat((tokens, logits[:, -1:].argmax(dim=-1)), dim=1)
    return tokens
'''

TRAIN_TRANSPOSED_CE = '''
def train_toy_model(seed, steps=300):
    """cross_entropy with the class dimension second, model.zero_grad(set_to_none=True) after the step."""
    torch.manual_seed(seed)
    model = GPT(vocab_size=16, d_model=32, num_heads=2, d_ff=64, n_layers=1, max_len=32)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2, foreach=True)
    model.train()
    history = []
    for step in range(steps):
        batch = toy_batch(16)
        inputs, targets = batch[:, :-1], batch[:, 1:]
        loss = F.cross_entropy(model(inputs).transpose(1, 2), targets)
        loss.backward()
        optimizer.step()
        model.zero_grad(set_to_none=True)
        history.append(float(loss.detach()))
    return history
'''

NOISY_GLOBAL_RNG = '''
# uses the global RNG everywhere: at import, in constructors and in every forward (results discarded)
torch.manual_seed(1234)
_noise = torch.randn(1000)

_base_attention, _base_gpt = CausalSelfAttention, GPT


class CausalSelfAttention(_base_attention):
    def forward(self, x, start_pos=0, use_cache=False):
        torch.rand(3)
        return super().forward(x, start_pos=start_pos, use_cache=use_cache)


class GPT(_base_gpt):
    def __init__(self, *args, **kwargs):
        torch.randn(5)
        super().__init__(*args, **kwargs)

    def forward(self, tokens, start_pos=0, use_cache=False):
        torch.manual_seed(int(torch.randint(0, 10_000, ())))
        return super().forward(tokens, start_pos=start_pos, use_cache=use_cache)
'''

SCRIPT_NOISE = '''
%matplotlib inline
!pip list
print("checking my work")
if __name__ == "__main__":
    demo = GPT(16, 32, 2, 64, 2, 32)
    print(generate(demo, torch.zeros(1, 3, dtype=torch.long), 5))
'''

FIRST_ATTEMPT_ROPE = '''
def apply_rope(x, positions, base=10000.0):
    # first attempt (wrong: the rotate_half layout); fixed in a later cell
    d = x.shape[-1]
    angles = positions.to(x.dtype)[:, None] * base ** (-torch.arange(0, d, 2, dtype=x.dtype) / d)
    a, b = x[..., : d // 2], x[..., d // 2:]
    return torch.cat((a * angles.cos() - b * angles.sin(), a * angles.sin() + b * angles.cos()), dim=-1)
'''

LATER_FIX = '''
print("redefining apply_rope after finding the bug")


def apply_rope(x, positions, base=10000.0):
    d = x.shape[-1]
    angles = positions.to(x.dtype)[:, None] * base ** (-torch.arange(0, d, 2, dtype=x.dtype) / d)
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack((a * angles.cos() - b * angles.sin(), a * angles.sin() + b * angles.cos()), dim=-1).flatten(-2)


print(apply_rope(torch.randn(1, 4, 8), torch.arange(4)).shape)
'''

VARIANTS: list[Entry] = [
    Entry("rope-complex-numbers", "RoPE with view_as_complex, torch.polar and torch.outer",
          replace={"rope_function": ROPE_COMPLEX}),
    Entry("rope-slice-assignment", "RoPE written into torch.empty_like with slice assignment, torch.pow",
          replace={"rope_function": ROPE_SLICE_ASSIGN}),
    Entry("rope-rotation-matrix-einsum", "an explicit 2x2 rotation matrix per pair, einsum, unflatten",
          replace={"rope_function": ROPE_MATRIX_EINSUM}),
    Entry("rope-float64-angles", "angles, cos and sin always in float64, cast to x's dtype",
          replace={"rope_function": ROPE_FLOAT64_ANGLES}),
    Entry("kv-cat-cache", "a KVCache grown with torch.cat from empty buffers (same return values)",
          replace={"kv_cache_class": KV_CAT}),
    Entry("kv-index-copy", "index_copy_ under no_grad and narrow", replace={"kv_cache_class": KV_INDEX_COPY}),
    Entry("attn-einsum-finfo-min", "einsum attention, tril(diagonal=s - t) mask filled with finfo.min",
          replace={"attention_class": ATT_EINSUM_FINFO}),
    Entry("attn-llama-style-mask", "mask only for several queries (triu, torch.where with -inf), F.softmax",
          replace={"attention_class": "import torch.nn.functional as F\n" + ATT_WHERE_LLAMA}),
    Entry("attn-rotate-keys-at-read", "the cache stores un-rotated keys, rotated at their positions when read",
          replace={"attention_class": ATT_ROTATE_AT_READ}),
    Entry("attn-fused-qkv-float64", "fused QKV from the three weights, attention computed in float64",
          replace={"attention_class": ATT_FUSED_QKV_FLOAT64}),
    Entry("block-helpers", "Block with a helper for the attention sublayer, positional cache arguments",
          replace={"block_class": BLOCK_HELPERS}),
    Entry("gpt-tied-other-way-matmul", "tok_emb.weight = head.weight, logits by matmul with the embedding",
          replace={"gpt_class": GPT_TIED_OTHER_WAY}),
    Entry("gen-prompt-token-by-token", "the prompt fed through the cache token by token, output preallocated, "
          "inference_mode", replace={"generate_function": GEN_PROMPT_TOKEN_BY_TOKEN}),
    Entry("gen-recompute-without-cache", "no cache at all: the whole sequence recomputed at every step",
          replace={"generate_function": GEN_RECOMPUTE}),
    Entry("gen-without-no-grad", "generate without torch.no_grad (wasteful, not wrong)",
          mutations=(M("@torch.no_grad()\n", ""),)),
    Entry("train-transposed-cross-entropy", "cross_entropy on [batch, vocab, t], zero_grad after the step, "
          "float(loss.detach()), foreach Adam", replace={"training_function": TRAIN_TRANSPOSED_CE},
          before=("import math\n\n\ndef toy_batch(batch_size, seq_len=24, period=4, vocab_size=16):\n"
                  "    pattern = torch.randint(0, vocab_size, (batch_size, period))\n"
                  "    return pattern.repeat(1, math.ceil(seq_len / period))[:, :seq_len]",)),
    Entry("global-rng-everywhere", "seeds and draws from the global RNG at import and in every forward",
          after=(NOISY_GLOBAL_RNG,)),
    Entry("script-with-magics-and-prints", "prints, IPython magics and a __main__ demo block", after=(SCRIPT_NOISE,)),
    Entry("redefined-in-later-cell", "a wrong first apply_rope, fixed by a redefinition in a later cell",
          replace={"rope_function": FIRST_ATTEMPT_ROPE}, after=(LATER_FIX,)),
]
