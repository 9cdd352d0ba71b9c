"""Conditions and expected values in knowledge entries: small arithmetic expressions over
the problem, the target and the current configuration, read without running Python.

An entry's plan says when it applies and what it is expected to reach, e.g.

    when: "intensity >= ridge"
    expect: "1.0 * wave_eff(cdiv(M, 128) * cdiv(N, 256), sms)"

`evaluate(text, names)` parses the text with `ast` and interprets only numbers, names,
`+ - * / // %`, comparisons, `and` / `or` / `not`, `a if c else b` and the functions in
`FUNCTIONS` (`cdiv`, `min`, `max`, `log2`, `wave_eff(tiles, sms)`); anything else (attributes, subscripts, calls of other names, strings) is a
`ValueError` naming it, and so is a name the situation does not define (an entry written
for another task simply does not apply). `situation(...)` builds the names from what the
environment publishes: the shape's sizes (`M`, `N`, `K`), the target (`sms`, `ridge` in
flop/byte, `l2_bytes`), the task's `intensity` (flops over compulsory bytes), the
observation's performance (`frac`: fraction of the library, `roofline`: fraction of the
roofline) and the configuration, one value per catalog transformation (`tile_m`,
`split_k`, `tma`, ...; booleans as 0/1, an unset value such as the baseline's Triton
default stages as 0).
"""

from __future__ import annotations

import ast
import math
import operator
from functools import lru_cache

_BIN = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
        ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod}
_CMP = {ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
        ast.Eq: operator.eq, ast.NotEq: operator.ne}
MAX_TEXT = 400


def _cdiv(a, b):
    return -(-int(a) // int(b))


def _wave_eff(tiles, sms):
    """The share of the wave slots that `tiles` programs fill on `sms` SMs, one program
    per SM at a time: tiles / (waves * sms); 133 tiles on 132 SMs fill about half."""
    tiles, sms = int(tiles), int(sms)
    return tiles / (_cdiv(tiles, sms) * sms) if tiles > 0 and sms > 0 else 0.0


FUNCTIONS = {
    "cdiv": _cdiv,
    "wave_eff": _wave_eff,
    "min": min,
    "max": max,
    "log2": math.log2,
}


class Unknown(ValueError):
    """A name the situation does not define: the condition does not apply here."""


@lru_cache(maxsize=1024)
def parse(text: str) -> ast.Expression:
    """The expression's tree, checked against the whitelist once."""
    if not isinstance(text, str) or not text.strip() or len(text) > MAX_TEXT:
        raise ValueError(f"an expression is a non-empty string of at most {MAX_TEXT} characters")
    tree = ast.parse(text.strip(), mode="eval")
    for node in ast.walk(tree):
        ok = isinstance(node, (ast.Expression, ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare,
                               ast.IfExp, ast.Name, ast.Load, ast.Constant, ast.Call, ast.And,
                               ast.Or, ast.Not, ast.USub, ast.UAdd, *_BIN, *_CMP))
        if isinstance(node, ast.Constant) and (isinstance(node.value, bool)
                                               or not isinstance(node.value, (int, float))):
            ok = False
        if isinstance(node, ast.Call) and not (isinstance(node.func, ast.Name)
                                               and node.func.id in FUNCTIONS and not node.keywords):
            ok = False
        if not ok:
            raise ValueError(f"{text!r}: {type(node).__name__} is not allowed in a condition "
                             f"(numbers, names, arithmetic, comparisons, and/or/not, "
                             f"{', '.join(FUNCTIONS)})")
    return tree


def evaluate(text: str, names: dict):
    """The value of expression `text` with `names` (see the module docstring)."""
    return _eval(parse(text).body, names)


def holds(text: str, names: dict) -> bool:
    """Whether condition `text` holds; False where it names something unknown here."""
    try:
        return bool(evaluate(text, names))
    except (Unknown, ZeroDivisionError, OverflowError):
        return False


def _eval(node, names: dict):
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        if node.id in FUNCTIONS or node.id not in names:
            raise Unknown(f"unknown name {node.id!r}")
        return names[node.id]
    if isinstance(node, ast.BinOp):
        return _BIN[type(node.op)](_eval(node.left, names), _eval(node.right, names))
    if isinstance(node, ast.UnaryOp):
        value = _eval(node.operand, names)
        return -value if isinstance(node.op, ast.USub) else (
            +value if isinstance(node.op, ast.UAdd) else not value)
    if isinstance(node, ast.BoolOp):
        values = (_eval(v, names) for v in node.values)
        return all(values) if isinstance(node.op, ast.And) else any(values)
    if isinstance(node, ast.Compare):
        left = _eval(node.left, names)
        for op, comp in zip(node.ops, node.comparators):
            right = _eval(comp, names)
            if not _CMP[type(op)](left, right):
                return False
            left = right
        return True
    if isinstance(node, ast.IfExp):
        return _eval(node.body, names) if _eval(node.test, names) else _eval(node.orelse, names)
    if isinstance(node, ast.Call):
        return FUNCTIONS[node.func.id](*(_eval(a, names) for a in node.args))
    raise ValueError(f"{type(node).__name__} is not allowed")  # parse() keeps these out


def situation(core, sizes: dict, config: dict, perf) -> dict:
    """The names a condition may use, from the environment's published facts (`core` is
    `env.unwrapped`: its task and target; `sizes` is `info["sizes"]`), the configuration
    (transformation name -> value, `ConfigView.as_dict`) and the observation's `perf`."""
    task, target = core.task, core.target
    profile = target.profile
    names: dict = {k: v for k, v in sizes.items()}
    flops, moved = task.flops(sizes), task.min_bytes(sizes)
    names.update(
        sms=target.sms, l2_bytes=profile.l2_bytes,
        ridge=profile.bf16_tflops_peak / max(profile.dram_tbps, 1e-9),
        intensity=flops / max(moved, 1.0),
        frac=float(perf[2]), roofline=float(perf[1]))
    for name, value in config.items():
        if isinstance(value, bool):
            names[name] = int(value)
        elif isinstance(value, (int, float)):
            names[name] = value
        elif value is None:
            names[name] = 0
        # strings ("atomic", "?") are not numbers: a condition naming them does not apply
    return names

