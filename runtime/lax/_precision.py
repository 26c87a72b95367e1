"""The precision and accuracy vocabulary of `kiln.lax`, with JAX's names and members:
`Precision`, `DotAlgorithm`, `DotAlgorithmPreset`, `PrecisionLike` (the type of dot_general's
`precision`), `AccuracyMode` and `Tolerance` (the `accuracy` of transcendental unary ops).

kiln accepts every form JAX accepts and checks it as JAX does (`check_precision`,
`check_accuracy`), then computes the same way whatever was asked for: dot products of the
operands' dtype (or `preferred_element_type`) at full precision, as `Precision.HIGHEST`;
unary functions at kiln's one accuracy. One exception: a convolution's `precision` that asks
for full precision (`conv_precision`) keeps the LLVM backend's 3x3 convolutions off Winograd's
transforms, which round more than the direct sum (docs/conv.md). Nothing is lowered to fewer bits (no TF32 or bfloat16
passes), so a `DotAlgorithmPreset` that JAX's CPU backend rejects (`F16_F16_F32`, the
float8 ones) is accepted too.
"""
import enum
from typing import NamedTuple, Optional, Union

__all__ = ["AccuracyMode", "DotAlgorithm", "DotAlgorithmPreset", "Precision", "PrecisionLike",
           "Tolerance"]


class Precision(enum.Enum):
    DEFAULT = 0
    HIGH = 1
    HIGHEST = 2

    def __str__(self):
        return self.name


_PRECISION_STRINGS = {"highest": Precision.HIGHEST, "float32": Precision.HIGHEST,
                      "high": Precision.HIGH, "bfloat16_3x": Precision.HIGH,
                      "tensorfloat32": Precision.HIGH, "default": Precision.DEFAULT,
                      "bfloat16": Precision.DEFAULT, "fastest": Precision.DEFAULT}


class DotAlgorithm(NamedTuple):
    """An explicit algorithm for dot products: operand and accumulation types and how many
    components each operand is split into (kiln computes at full precision whatever it says)."""
    lhs_precision_type: object
    rhs_precision_type: object
    accumulation_type: object
    lhs_component_count: int = 1
    rhs_component_count: int = 1
    num_primitive_operations: int = 1
    allow_imprecise_accumulation: bool = False


class DotAlgorithmPreset(enum.Enum):
    """JAX's named dot algorithms (types of the operands, types of the accumulation)."""
    DEFAULT = enum.auto()
    ANY_F8_ANY_F8_F32 = enum.auto()
    ANY_F8_ANY_F8_F32_FAST_ACCUM = enum.auto()
    ANY_F8_ANY_F8_ANY = enum.auto()
    ANY_F8_ANY_F8_ANY_FAST_ACCUM = enum.auto()
    F16_F16_F16 = enum.auto()
    F16_F16_F32 = enum.auto()
    BF16_BF16_BF16 = enum.auto()
    BF16_BF16_F32 = enum.auto()
    BF16_BF16_F32_X3 = enum.auto()
    BF16_BF16_F32_X6 = enum.auto()
    BF16_BF16_F32_X9 = enum.auto()
    TF32_TF32_F32 = enum.auto()
    TF32_TF32_F32_X3 = enum.auto()
    F32_F32_F32 = enum.auto()
    F64_F64_F64 = enum.auto()

    def __str__(self):
        return self.name


PrecisionLike = Union[None, str, Precision, tuple[str, str], tuple[Precision, Precision],
                      DotAlgorithm, DotAlgorithmPreset]


def _one_precision(p):
    if p is None or isinstance(p, Precision):
        return p
    if isinstance(p, str) and p in _PRECISION_STRINGS:
        return _PRECISION_STRINGS[p]
    raise ValueError(p)


def check_precision(precision):
    """JAX's accepted forms of `precision` (canonicalised: strings become Precision values or
    presets); anything else is JAX's ValueError."""
    if isinstance(precision, (DotAlgorithm, DotAlgorithmPreset)):
        return precision
    if isinstance(precision, str) and precision in DotAlgorithmPreset.__members__:
        return DotAlgorithmPreset[precision]
    try:
        if isinstance(precision, tuple) and len(precision) == 2:
            return tuple(map(_one_precision, precision))
        if not isinstance(precision, tuple):
            return _one_precision(precision)
    except ValueError:
        pass
    raise ValueError(
        "Precision argument must be one of:\n- None,\n- a string in "
        f"{list(_PRECISION_STRINGS) + [None]},\n- a lax.Precision value,\n- a tuple of two "
        "lax.Precision values or strings,\n- a lax.DotAlgorithmPreset or the name of one of "
        f"these presets, or\n- a lax.DotAlgorithm value;\nbut got {precision}.")


_FULL_PRESETS = (DotAlgorithmPreset.F32_F32_F32, DotAlgorithmPreset.F64_F64_F64)


def conv_precision(precision):
    """A convolution's `precision` (checked as `check_precision` does) as the primitive's
    parameter: "highest" where it asks for full precision (`Precision.HIGHEST` for either
    operand, "highest"/"float32", the F32_F32_F32 or F64_F64_F64 presets), else None."""
    p = check_precision(precision)
    asked = p if isinstance(p, tuple) else (p,)
    full = any(q is Precision.HIGHEST or q in _FULL_PRESETS for q in asked)
    return "highest" if full else None


class AccuracyMode(enum.Enum):
    HIGHEST = 1
    DEFAULT = 2


class Tolerance:
    """Tolerances asked of a unary function: (atol and rtol) or (atol and ulps)."""

    def __init__(self, atol: float = 0.0, rtol: float = 0.0, ulps: int = 0):
        if atol < 0.0 or rtol < 0.0 or ulps < 0.0:
            raise ValueError("Tolerances must be non-negative.")
        if atol == 0.0 and rtol == 0.0 and ulps == 0:
            raise ValueError("At least one of atol, rtol, or ulps must be set.")
        self.atol, self.rtol, self.ulps = atol, rtol, ulps


def check_accuracy(accuracy: Optional[object]):
    if accuracy is not None and not isinstance(accuracy, (Tolerance, AccuracyMode)):
        raise NotImplementedError(f"Accuracy {accuracy} not supported")
    return accuracy
