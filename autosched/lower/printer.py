"""Loop IR as readable text, for debugging, error messages and golden files."""

from __future__ import annotations

from .ir import Allocate, Barrier, For, IfThenElse, PrimFunc, Seq, Stmt, Store


def format_stmt(s: Stmt, indent: int = 0) -> str:
    pad = "  " * indent
    if isinstance(s, For):
        kind = "" if s.kind == "serial" else f"  # {s.kind}{' ' + s.thread_tag if s.thread_tag else ''}"
        ann = "".join(f" {k}={v}" for k, v in s.annotations)
        head = f"{pad}for {s.var.name} in range({s.extent}):{kind}{ann}"
        return head + "\n" + format_stmt(s.body, indent + 1)
    if isinstance(s, Seq):
        return "\n".join(format_stmt(x, indent) for x in s.stmts)
    if isinstance(s, Store):
        idx = ", ".join(map(repr, s.indices))
        return f"{pad}{s.buffer.name}[{idx}] = {s.value!r}"
    if isinstance(s, IfThenElse):
        text = f"{pad}if {s.cond!r}:\n{format_stmt(s.then, indent + 1)}"
        if s.otherwise is not None:
            text += f"\n{pad}else:\n{format_stmt(s.otherwise, indent + 1)}"
        return text
    if isinstance(s, Allocate):
        b = s.buffer
        head = f"{pad}{b.name} = allocate({b.dtype}, {list(b.shape)}, scope={b.scope})"
        return head + "\n" + format_stmt(s.body, indent)
    if isinstance(s, Barrier):
        return f"{pad}barrier()"
    return f"{pad}{s!r}"


def format_func(f: PrimFunc) -> str:
    params = ", ".join(f"{b.name}: {b.dtype}{list(b.shape)}" for b in f.params)
    return f"def {f.name}({params}):\n{format_stmt(f.body, 1)}"
