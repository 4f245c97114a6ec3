"""Known mistakes: each entry is the reference with ONE realistic bug, the part in which it must lose points
and, where the suite recognises it from outputs alone, the hint text the student must see.  See the package
docstring for the format."""
from __future__ import annotations

from autograder.authoring.catalogue import Entry, M

RMS = "rms_norm"
SWIGLU = "swiglu"

# --- lines of the reference solution cells ------------------------------------------------------------------
_MEAN_SQUARE = "mean_square = x.pow(2).mean(dim=-1, keepdim=True)"
_NORMALISE = "return x / torch.sqrt(mean_square + eps) * weight"
_DOWN = "return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))"
_GATE = "self.gate_proj = nn.Linear(d_model, d_ff, bias=False)"
_UP = "self.up_proj = nn.Linear(d_model, d_ff, bias=False)"
_DOWN_PROJ = "self.down_proj = nn.Linear(d_ff, d_model, bias=False)"

MISTAKES = [
    # rms_norm
    Entry("rms-eps-outside-sqrt", "eps added to the RMS instead of the mean square", RMS,
          mutations=(M(_NORMALISE, "return x / (torch.sqrt(mean_square) + eps) * weight"),),
          hint="eps belongs inside the square root"),
    Entry("rms-no-eps", "the mean of squares without eps inside the sqrt", RMS,
          mutations=(M(_NORMALISE, "return x / torch.sqrt(mean_square) * weight"),),
          hint="RMSNorm without eps"),
    Entry("rms-mean-over-dim-0", "the mean of squares over the first dimension, not the features", RMS,
          mutations=(M(_MEAN_SQUARE, "mean_square = x.pow(2).mean(dim=0, keepdim=True)"),),
          hint="normalise over the last dimension"),
    Entry("rms-centred-variance", "the mean-centred variance: that is LayerNorm without the bias", RMS,
          mutations=(M(_MEAN_SQUARE, "mean = x.mean(dim=-1, keepdim=True)\n"
                                     "    x = x - mean\n"
                                     "    mean_square = x.pow(2).mean(dim=-1, keepdim=True)"),),
          hint="LayerNorm's normalisation"),
    Entry("rms-weight-before-normalising", "weight multiplied into x before the mean of squares", RMS,
          mutations=(M(_MEAN_SQUARE, "x = x * weight\n    mean_square = x.pow(2).mean(dim=-1, keepdim=True)"),
                     M(_NORMALISE, "return x / torch.sqrt(mean_square + eps)")),
          hint="normalise x first, then multiply by weight"),
    Entry("rms-default-eps-1e-5", "LayerNorm's default eps (1e-5) kept for RMSNorm", RMS,
          mutations=(M("def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6)",
                       "def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-5)"),
                     M("def __init__(self, d_model: int, eps: float = 1e-6)",
                       "def __init__(self, d_model: int, eps: float = 1e-5)")),
          hint="the default must be eps=1e-6"),
    # swiglu
    Entry("swiglu-silu-on-up", "silu on the up branch, the gate left linear", SWIGLU,
          mutations=(M(_DOWN, "return self.down_proj(self.gate_proj(x) * F.silu(self.up_proj(x)))"),),
          hint="silu applied to the up projection instead of the gate"),
    Entry("swiglu-gelu", "GELU instead of SiLU on the gate", SWIGLU,
          mutations=(M(_DOWN, "return self.down_proj(F.gelu(self.gate_proj(x)) * self.up_proj(x))"),),
          hint="GELU instead of SiLU"),
    Entry("swiglu-sigmoid-gate", "sigmoid gating without the multiply by the gate's input (GLU)", SWIGLU,
          mutations=(M(_DOWN, "return self.down_proj(torch.sigmoid(self.gate_proj(x)) * self.up_proj(x))"),),
          hint="sigmoid(gate) * up (the original GLU)"),
    Entry("swiglu-biases", "projections with the nn.Linear default bias=True", SWIGLU,
          mutations=(M(_GATE, "self.gate_proj = nn.Linear(d_model, d_ff)"),
                     M(_UP, "self.up_proj = nn.Linear(d_model, d_ff)"),
                     M(_DOWN_PROJ, "self.down_proj = nn.Linear(d_ff, d_model)")),
          hint="unexpected ['down_proj.bias', 'gate_proj.bias', 'up_proj.bias']"),
    Entry("swiglu-no-up", "silu(gate) sent straight to the down projection, up_proj unused", SWIGLU,
          mutations=(M(_DOWN, "return self.down_proj(F.silu(self.gate_proj(x)))"),),
          hint="without the up projection"),
]
