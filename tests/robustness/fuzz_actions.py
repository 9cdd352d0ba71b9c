"""Fuzzed actions and reset options for the Argus environments, shared by the property
tests (`test_fuzz_envs.py`) and the long run (`benchmarks/fuzz_envs.py`).

Every generator takes a `random.Random` (hypothesis supplies one it controls, the
benchmark a seeded one) and the unwrapped environment, and returns a `Fuzzed` action:
the value to pass to `step`, a short category for the statistics, and whether the
action must be refused (a non-empty `info["error"]` and a negative reward) or may be
anything an agent could legitimately send.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

import numpy as np

#: placeholder a hostile text uses for the file it would create if it ever ran
CANARY = "/tmp/argus_canary_never_created"


@dataclass(frozen=True)
class Fuzzed:
    action: object
    category: str
    must_fail: bool

    def describe(self, limit: int = 300) -> str:
        text = repr(self.action)
        return f"[{self.category}] {text if len(text) <= limit else text[:limit] + '...'}"


# ---------------------------------------------------------------- program text pieces
def insert_in_body(text: str, code: str) -> str:
    """`code` (one or more lines) placed right after the kernel's `A.grid(...)` line."""
    m = re.search(r"^( +)A\.grid\(.*$", text, flags=re.M)
    assert m, "every task program starts its body with A.grid(...)"
    indent = m.group(1)
    block = "\n".join(indent + line for line in code.splitlines())
    return text[:m.end()] + "\n" + block + text[m.end():]


def insert_at_top(text: str, code: str) -> str:
    """`code` placed at module level just before the kernel's decorator."""
    i = text.index("@")
    return text[:i] + code + "\n\n\n" + text[i:]


def insert_param(text: str, param: str) -> str:
    """An extra parameter (`name: annotation = default`) first in the kernel's list."""
    m = re.search(r"^def \w+\(\n?", text, flags=re.M)
    assert m, "task programs define their kernel with `def name(`"
    sep = "    " if m.group(0).endswith("\n") else ""
    return text[:m.end()] + sep + param + (",\n" if sep else ", ") + text[m.end():]


def hostile_programs(base: str, path: str = CANARY, port: int = 9, token: str = "argus_canary",
                     module: str = "argus_canary_mod") -> list[tuple[str, str]]:
    """(name, text) programs built on the task program `base`, each with a payload that
    would create `path`, connect to 127.0.0.1:`port`, call `module.fire(token)` or pass
    `token` to a builtin if any part of the text ran. The parser must reject all of them."""
    fire = f"__import__({module!r}).fire({token!r})"
    touch = f"__import__('os').system('touch {path}')"
    conn = f"__import__('socket').create_connection(('127.0.0.1', {port}))"
    op = f"open({path!r}, 'w')"
    body = {
        "import-os": f"import os\nos.system('touch {path}')",
        "from-import": f"from os import system\nsystem('touch {path}')",
        "import-socket": f"import socket\nsocket.create_connection(('127.0.0.1', {port}))",
        "dunder-import-system": f"z = {touch}",
        "open-file": f"z = {op}",
        "open-as-statement": op,
        "socket-connect": f"z = {conn}",
        "socket-object": f"z = __import__('socket').socket().connect(('127.0.0.1', {port}))",
        "call-arbitrary-function": f"z = {fire}",
        "call-function-statement": fire,
        "getattr-chain": f"z = getattr(getattr(__import__({module!r}), 'fire'), '__call__')({token!r})",
        "getattr-on-alias": f"z = getattr(A, {token!r})",
        "class-subclasses": "z = ().__class__.__base__.__subclasses__()",
        "subclasses-popen": f"z = A.__class__.__base__.__subclasses__()[0](['touch', {path!r}])",
        "globals-builtins": f"z = A.load.__globals__['__builtins__']['open']({path!r}, 'w')",
        "alias-dunder-dict": f"z = A.__dict__[{token!r}]",
        "format-string": f"z = '{{0.__class__.__init__.__globals__}}{token}'.format(A)",
        "percent-format": f"z = '%s{token}' % {op}",
        "f-string": f"z = f\"{{{op}}}\"",
        "exec": f"exec({token!r})",
        "eval": f"z = eval({token!r})",
        "compile": f"z = compile({token!r}, 'x', 'exec')",
        "breakpoint": "breakpoint()",
        "lambda-call": f"z = (lambda: {op})()",
        "lambda-default": f"f = lambda q={op}: q",
        "nested-def-default": f"def g(q={op}):\n    pass",
        "nested-def-decorator": f"@{fire}\ndef g():\n    pass",
        "class-body": f"class C:\n    q = {op}",
        "with-open": f"with {op} as f:\n    pass",
        "walrus": f"z = (q := {op})",
        "annotated-assign": f"z: {op} = 1",
        "op-argument": f"z = A.arange({op})",
        "tag-value": f"z = A.tag(A.arange(16), t={op})",
        "range-bound": f"for i in A.range(0, {op}):\n    pass",
        "if-condition": f"if {op}:\n    pass",
        "try-except": f"try:\n    z = 1\nexcept Exception:\n    {op}",
        "list-comprehension": f"z = [{op} for i in A.range(2)]",
        "starred-call": f"z = A.arange(*{op})",
        "sys-modules": f"z = __import__('sys').modules[{module!r}].fire({token!r})",
        "vars-globals": f"z = vars()[{token!r}]",
    }
    top = {
        "module-import": f"import os\nos.system('touch {path}')",
        "module-call": fire,
        "module-assign": f"X = {op}",
        "module-annotation": f"X: {op} = 1",
        "module-class": f"class C:\n    q = {fire}",
        "module-function": f"def g():\n    pass\n\n\ng({op})",
        "module-if": f"if {op}:\n    pass",
        "module-for": f"for i in {op}:\n    pass",
    }
    params = {
        "default-argument": f"ZZ: A.const = {op}",
        "default-call": f"ZZ: A.const = {fire}",
        "annotation": f"ZZ: {op}",
        "annotation-call": f"ZZ: {fire} = 1",
        "tensor-dim-annotation": f"ZZ: A.Tensor[A.f32, {op}]",
        "tensor-dtype-annotation": f"ZZ: A.Tensor[{fire}, \"M\"]",
        "scalar-default": f"ZZ: A.f32 = {fire}",
    }
    out = [(f"body-{k}", insert_in_body(base, v)) for k, v in body.items()]
    out += [(f"top-{k}", insert_at_top(base, v)) for k, v in top.items()]
    out += [(f"param-{k}", insert_param(base, v)) for k, v in params.items()]
    deco = base.index("@")
    line_end = base.index("\n", deco)
    out += [
        ("decorator-replaced", base[:deco] + f"@{fire}" + base[line_end:]),
        ("decorator-stacked", base[:deco] + f"@{fire}\n" + base[deco:]),
        ("decorator-open", base[:deco] + f"@{op}\n" + base[deco:]),
        ("decorator-option", base[:deco] + f"@A.kernel(num_warps={fire})" + base[line_end:]),
        ("return-annotation", re.sub(r"\):\n", f") -> {fire}:\n", base, count=1)),
        ("second-kernel", base + "\n\n" + base.replace("@A.kernel", f"@{fire}", 1)),
    ]
    return out


def signature_breakers(base: str, signature: dict) -> list[tuple[str, str]]:
    """Programs that parse and type-check but do not take the task's tensors."""
    out = []
    for name, (dims, dtype) in signature.items():
        head = re.search(rf"^\s*{name}: A\.Tensor\[[^\]]*\],?\s*$", base, flags=re.M)
        if head is None:
            continue
        line = head.group(0)
        other = "f16" if dtype != "f16" else "f32"
        out.append((f"dtype-{name}", base.replace(line, line.replace(f"A.{dtype}", f"A.{other}"))))
        out.append((f"renamed-{name}", base.replace(line, line.replace(f"{name}:", f"{name}_x:"))))
        if len(dims) > 1:
            swapped = line.replace(f'"{dims[0]}", "{dims[1]}"', f'"{dims[1]}", "{dims[0]}"')
            if swapped != line:
                out.append((f"dims-swapped-{name}", base.replace(line, swapped)))
    first = re.search(r"^(\s*)\w+: A\.Tensor\[", base, flags=re.M)
    if first:
        extra = first.group(1) + 'zz: A.Tensor[A.f32, "M"],\n'
        out.append(("extra-tensor", base[:first.start()] + extra + base[first.start():]))
    return out


# ---------------------------------------------------------------- mutations
NUMBERS = ["0", "1", "-1", "2", "3", "7", "16", "64", "128", "256", "1024", "1 << 20",
           "2147483648", "10 ** 12", "1000000000000", "99999999999999999999999", "0.5",
           "-0.0", "1e308", "9" * 80, "A.num_sms()", "M", "K", "N"]
TOKENS = ["A.load", "A.store", "A.dot", "A.arange", "A.zeros", "A.program_id", "A.grid",
          "A.range", "A.static_range", "A.cdiv", "A.where", "A.cast", "A.tag", "A.trans",
          "A.sum", "A.atomic_add", "A.assert_tags", "A.covers", "rows", "cols", "acc", "ks",
          "k", "M", "N", "K", "BM", "BN", "BK", "a", "b", "c", "A.bf16", "A.f32", "A.i1",
          "__class__", "open", "os", "__import__", "getattr", "A.__dict__", "None", "True",
          "(", ")", "[", "]", ":", ",", "=", "+", "*", "-", "<", "@", "\\", "#", "'", '"']
LINES = ["for i in A.range(0, 1000000000000):", "    acc = acc",
         "for i in A.range(0, 10 ** 12, 1):", "    pass",
         "x = A.zeros((1 << 20, 1 << 20), A.f32)", "x = A.arange(1 << 30)",
         "A.grid(1000000000000)", "A.store(c[rows, cols], A.cast(acc * 0.0, A.bf16))",
         "acc = A.zeros((BM, BN), A.f32)", "if M == 100:", "    acc = acc * 2.0",
         "for j in A.static_range(64):", "    for q in A.static_range(64):",
         "z = " + "-(" * 150 + "1" + ")" * 150, "z = " + " + ".join(["1"] * 300),
         "if 1:\n" + "".join("    " * d + "if 1:\n" for d in range(1, 12)) + "    " * 12 + "pass",
         "A.store(a[rows, ks], A.zeros((BM, BK), A.bf16))", "import os", "del acc",
         "z = '\u0430bc'", "\u0430cc = acc", "z = 1\x00", "z = '\u202e'", "\t\tz = 1"]
UNICODE = ["\u0430", "\u202e", "\u00a0", "\x00", "\ufeff", "\U0001f600", "\u2028", "\ud800",
           "\x7f", "\r", "\t", "\u0301", "\uff21"]


def mutate(rng: random.Random, text: str, rounds: int | None = None) -> str:
    """`text` after 1-3 random edits: deletions, duplications, swaps, substituted numbers
    or tokens, inserted lines or characters, truncation."""
    for _ in range(rounds or rng.randint(1, 3)):
        lines = text.split("\n")
        i = rng.randrange(len(lines))
        op = rng.randrange(9)
        if op == 0 and len(text) > 2:                  # delete a span
            a = rng.randrange(len(text))
            text = text[:a] + text[a + rng.randint(1, 40):]
        elif op == 1:                                  # duplicate a line
            lines.insert(i, lines[i])
            text = "\n".join(lines)
        elif op == 2:                                  # swap two lines
            j = rng.randrange(len(lines))
            lines[i], lines[j] = lines[j], lines[i]
            text = "\n".join(lines)
        elif op == 3:                                  # substitute a number
            nums = list(re.finditer(r"\b\d+\b", text))
            if nums:
                m = rng.choice(nums)
                text = text[:m.start()] + rng.choice(NUMBERS) + text[m.end():]
        elif op == 4:                                  # substitute a token
            words = list(re.finditer(r"[A-Za-z_][\w.]*", text))
            if words:
                m = rng.choice(words)
                text = text[:m.start()] + rng.choice(TOKENS) + text[m.end():]
        elif op == 5:                                  # insert a line, indented like its neighbour
            indent = re.match(r"\s*", lines[i]).group(0)
            lines.insert(i, "\n".join(indent + x for x in rng.choice(LINES).split("\n")))
            text = "\n".join(lines)
        elif op == 6:                                  # truncate
            text = text[:rng.randrange(len(text) + 1)]
        elif op == 7:                                  # insert an odd character
            a = rng.randrange(len(text) + 1)
            text = text[:a] + rng.choice(UNICODE) + text[a:]
        else:                                          # re-indent a line
            lines[i] = rng.choice(["", " ", "        ", "\t"]) + lines[i].lstrip()
            text = "\n".join(lines)
    return text


# ---------------------------------------------------------------- actions
def _programs(env) -> list[str]:
    cache = env.__dict__.setdefault("_fuzz_programs", {})
    if not cache:
        for name in env.task.programs:
            cache[name] = env.task.program(name).text
    return list(cache.values())


def text_action(rng: random.Random, env) -> Fuzzed:
    """A text action: a legal or masked call, a malformed call, a task program, a mutated
    program, a hostile program, a signature breaker, an oversized or odd text."""
    mask = env.action_mask()
    kind = rng.randrange(100)
    if kind < 18:
        i = rng.randrange(len(env.catalog))
        name, value = env.catalog[i]
        call = f"{name}()" if value is None else f"{name}({value!r})"
        return Fuzzed(call, "call-legal" if mask[i] else "call-masked", not mask[i])
    if kind < 30:
        bad = rng.choice([
            "", "   ", "(", "tile_m(", "tile_m)", "tile_m(3)", "tile_m(x)", "tile_m(1, 2)",
            "tile_m(v=64)", "tile_m(None)", "tile_m('64')", "tile_m(64.0)", "tma(1)", "undo(1)",
            "submit(True)", "frobnicate(2)", "__import__('os')", "os.system('true')",
            "tile_m(" + "9" * 5000 + ")", "tile_m(" + "-" * 100_000 + "1)",
            "(" * 300 + ")" * 300, "tile_m(\x00)", "\x00\x01", "tile_m(\ud800)", "\U0001f600()",
            "x" * 300_000, "split_k(" + "1" * 200 + ")", "tile_m(64))", "lambda: 0",
            "[tile_m(64)]", "tile_m(64); undo()", "A.load(x)", "undo", "submit"])
        return Fuzzed(bad, "call-malformed", True)
    if kind < 40:
        text = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz_()[]{}0123456789,.:=+-*/ '\"\\\t"
                                  + "".join(UNICODE)) for _ in range(rng.randint(0, 80)))
        return Fuzzed(text, "text-random", False)
    if kind < 50:
        return Fuzzed(rng.choice(_programs(env)), "program-task", False)
    if kind < 80:
        return Fuzzed(mutate(rng, rng.choice(_programs(env))), "program-mutated", False)
    base = rng.choice(_programs(env))
    if kind < 90:
        name, text = rng.choice(hostile_programs(base))
        return Fuzzed(text, f"program-hostile-{name}", True)
    if kind < 95:
        breakers = signature_breakers(base, env.task.signature)
        if breakers:
            name, text = rng.choice(breakers)
            return Fuzzed(text, "program-signature", True)
    big = rng.choice([
        ("program-oversized", base + "\n# " + "x" * 120_000, True),
        ("program-many-statements", insert_in_body(base, "z = 1\n" * 700), True),
        ("program-deep-blocks", insert_in_body(
            base, "".join("    " * d + "if 1:\n" for d in range(10)) + "    " * 10 + "pass"), True),
        ("program-deep-expression", insert_in_body(base, "z = " + "-" * 5000 + "1"), True),
        ("program-unroll", insert_in_body(
            base, "for i in A.static_range(100):\n    for j in A.static_range(100):\n        pass"),
         True),
        ("program-nul", base.replace("\n", "\n\x00", 1), True),
        ("program-long-loop", insert_in_body(base, "for i in A.range(0, 10 ** 12):\n    pass"),
         False),
    ])
    return Fuzzed(big[1], big[0], big[2])


ODD_VALUES = [None, "3", "split_k(4)", "", 3.0, float("nan"), float("inf"), -0.0, True, False,
              [1], (1,), {}, {"a": 1}, b"\x01", 1j, object(), np.float32(1.0),
              np.array(1), np.array([1, 2]), np.bool_(True), np.str_("1"), slice(1)]


def discrete_action(rng: random.Random, env) -> Fuzzed:
    """A discrete action: legal, masked, out of range, numpy-typed or of an odd type."""
    mask = env.action_mask()
    n = len(env.catalog)
    kind = rng.randrange(100)
    legal = np.flatnonzero(mask)
    masked = np.flatnonzero(mask == 0)
    if kind < 45 and len(legal):
        i = int(rng.choice(legal))
        cast = rng.choice([int, np.int64, np.int32, np.uint8, np.intp])
        return Fuzzed(cast(i), "index-legal", False)
    if kind < 65 and len(masked):
        i = int(rng.choice(masked))
        return Fuzzed(rng.choice([int, np.int64])(i), "index-masked", True)
    if kind < 80:
        value = rng.choice([-1, n, n + 1, -n, 2**31, 2**63, -2**63 - 1, 10**30, -10**30])
        if rng.random() < 0.3 and -2**63 <= value < 2**63:
            value = np.int64(value)
        return Fuzzed(value, "index-out-of-range", True)
    if kind < 85:
        return Fuzzed(np.uint64(2**64 - 1), "index-out-of-range", True)
    value = rng.choice(ODD_VALUES)
    return Fuzzed(value, "odd-type", not taken_as_index(env, value))


def taken_as_index(env, value) -> bool:
    """Whether the discrete space contains `value` (`np.array(1)`, `True`) and its index is
    legal now: the environment then takes it, as what the space contains."""
    try:
        contained = bool(env.action_space.contains(value))
    except Exception:  # noqa: BLE001 - a value the space cannot even compare
        return False
    return contained and bool(env.action_mask()[int(value)])


def action(rng: random.Random, env) -> Fuzzed:
    """A fuzzed action for `env` (unwrapped) in its own mode; text environments also
    meet discrete-style values and discrete ones text, now and then."""
    if env.mode == "text":
        if rng.random() < 0.05:
            odd = [v for v in ODD_VALUES if not isinstance(v, str)] + [0, 3, np.int64(2)]
            return Fuzzed(rng.choice(odd), "odd-type", True)
        return text_action(rng, env)
    if rng.random() < 0.05:
        return Fuzzed(rng.choice(["tile_m(128)", "undo()", "\x00"]), "odd-type", True)
    return discrete_action(rng, env)


MAY_RAISE = None  # `reset_options` verdict: well-formed sizes the task's programs may not take


def reset_options(rng: random.Random, env) -> tuple[object, bool | None]:
    """(options, must_raise): valid names (False), malformed options `reset` must refuse
    with a ValueError (True), and well-formed custom sizes that the task's baseline may
    not take (MAY_RAISE: a ValueError saying why, or a normal reset)."""
    names = [c.name for c in env.task.shape_cases("all")]
    dims = list(env.task.shapes[0].sizes)
    kind = rng.randrange(100)
    if kind < 15:
        return rng.choice([None, {}, {"shape": None}]), False
    if kind < 40:
        return {"shape": rng.choice(names)}, False
    if kind < 55:
        sizes = {d: rng.choice([1, 2, 7, 8, 16, 17, 64, 100, 1000, 4096, 65536, 2**31 - 1])
                 for d in dims}
        return {"shape": sizes}, MAY_RAISE
    bad = rng.choice([
        {"shape": "no-such-shape"}, {"shape": names[0][:-1]}, {"shape": names[0].upper()},
        {"shape": ""}, {"shape": "\x00"}, {"shape": "x" * 10_000},
        {"shape": {d: 0 for d in dims}}, {"shape": {d: -1 for d in dims}},
        {"shape": {d: 2**31 for d in dims}}, {"shape": {d: 10**40 for d in dims}},
        {"shape": {d: 64.0 for d in dims}}, {"shape": {d: "64" for d in dims}},
        {"shape": {d: True for d in dims}}, {"shape": {d: None for d in dims}},
        {"shape": {dims[0]: 64}}, {"shape": {**{d: 64 for d in dims}, "ZZ": 64}},
        {"shape": {}}, {"shape": 3}, {"shape": [64, 64, 64]}, {"shape": (64,)},
        {"shape": b"square-4096"}, {"shapes": names[0]}, {"seed": 1}, [], "shape", 3,
        ("shape", names[0]), {"shape": {d: float("nan") for d in dims}},
    ])
    return bad, True
