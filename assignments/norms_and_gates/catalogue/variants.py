"""Correct-but-different submissions: each must get full marks.  The contract they respect is the notebook's:
rms_norm(x, weight, eps=1e-6) over the last dimension; RMSNorm(d_model, eps=1e-6) with one parameter `weight`
(ones); SwiGLU(d_model, d_ff) with gate_proj, up_proj, down_proj, all without bias."""
from __future__ import annotations

from autograder.authoring.catalogue import Entry, M

_NORMALISE = "return x / torch.sqrt(mean_square + eps) * weight"
_DOWN = "return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))"

RMS_VECTOR_NORM = '''
def rms_norm(x, weight, eps=1e-6):
    """The RMS from the Euclidean norm: ||x|| / sqrt(d) is the root of the mean square."""
    d = x.shape[-1]
    rms = torch.sqrt(torch.linalg.vector_norm(x, dim=-1, keepdim=True) ** 2 / d + eps)
    return weight * (x / rms)
'''

RMS_FLOAT64_INSIDE = '''
def rms_norm(x, weight, eps=1e-6):
    """Computed in float64 and cast back to x's dtype, as some codebases do for half precision."""
    x64 = x.double()
    scale = torch.rsqrt(x64.square().mean(-1, keepdim=True) + eps)
    return (x64 * scale).to(x.dtype) * weight
'''

RMS_MODULE_OWN_FORWARD = '''
class RMSNorm(nn.Module):
    """Its own forward (not calling rms_norm), eps kept as a buffer-free attribute under another name."""

    def __init__(self, d_model, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d_model))
        self.variance_epsilon = eps

    def forward(self, hidden):
        variance = hidden.pow(2).mean(-1, keepdim=True)
        return self.weight * (hidden * torch.rsqrt(variance + self.variance_epsilon))
'''

SWIGLU_FUSED_SPLIT = '''
class SwiGLU(nn.Module):
    """gate and up computed by one matrix product on the two weights stacked, then split."""

    def __init__(self, d_model, d_ff):
        super().__init__()
        self.gate_proj = nn.Linear(d_model, d_ff, bias=False)
        self.up_proj = nn.Linear(d_model, d_ff, bias=False)
        self.down_proj = nn.Linear(d_ff, d_model, bias=False)

    def forward(self, x):
        both = x @ torch.cat([self.gate_proj.weight, self.up_proj.weight]).T
        gate, up = both.chunk(2, dim=-1)
        return self.down_proj(gate * torch.sigmoid(gate) * up)
'''

VARIANTS = [
    Entry("rms-rsqrt", "torch.rsqrt instead of 1 / sqrt",
          mutations=(M(_NORMALISE, "return x * torch.rsqrt(mean_square + eps) * weight"),)),
    Entry("rms-vector-norm", "the RMS from torch.linalg.vector_norm", replace={"rms_norm_function": RMS_VECTOR_NORM}),
    Entry("rms-float64-internals", "normalised in float64, cast back", replace={"rms_norm_function": RMS_FLOAT64_INSIDE}),
    Entry("rms-module-own-forward", "RMSNorm with its own forward, as Hugging Face's LlamaRMSNorm",
          replace={"rms_norm_module": RMS_MODULE_OWN_FORWARD}),
    Entry("swiglu-x-sigmoid-x", "x * sigmoid(x) instead of F.silu",
          mutations=(M(_DOWN, "gate = self.gate_proj(x)\n"
                              "        return self.down_proj(gate * torch.sigmoid(gate) * self.up_proj(x))"),)),
    Entry("swiglu-fused-gate-up", "one matrix product for gate and up, then chunk",
          replace={"swiglu_class": SWIGLU_FUSED_SPLIT}),
    Entry("swiglu-nn-silu", "an nn.SiLU module attribute (no parameters)",
          mutations=(M("self.down_proj = nn.Linear(d_ff, d_model, bias=False)",
                       "self.down_proj = nn.Linear(d_ff, d_model, bias=False)\n        self.act = nn.SiLU()"),
                     M(_DOWN, "return self.down_proj(self.act(self.gate_proj(x)) * self.up_proj(x))"))),
]
