"""`SessionCommand`: the commands whose first argument names a root session."""

from __future__ import annotations

from typing import Any

from typer.core import TyperCommand

from ._common import NEWEST

__all__ = ["SessionCommand"]


class SessionCommand(TyperCommand):
    """A command whose first argument is a root session; `--last` stands for `lead` there.

    `--last` takes the SESSION argument's place (`send --last reviewer 'again'`), which a
    declared flag could not do: the positional arguments after it would shift.
    """

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        end = args.index("--") if "--" in args else len(args)
        if "--last" in args[:end]:
            position = args.index("--last")
            rest = [*args[:position], *args[position + 1 :]]
            args = _insert_first_positional(rest, NEWEST, self._takes_value(ctx))
        return super().parse_args(ctx, args)

    def _takes_value(self, ctx: Any) -> set[str]:
        names: set[str] = set()
        for param in self.get_params(ctx):
            if getattr(param, "param_type_name", "") == "option" and not getattr(
                param, "is_flag", False
            ):
                names.update(getattr(param, "opts", []))
        return names


def _insert_first_positional(args: list[str], value: str, takes_value: set[str]) -> list[str]:
    """`args` with `value` where its first positional argument stands (or at the end)."""
    index = 0
    while index < len(args):
        arg = args[index]
        if arg == "--":
            break
        if not arg.startswith("-") or arg == "-":
            break
        # An option's value follows it unless it is given as `--opt=value`.
        index += 2 if arg in takes_value else 1
    index = min(index, len(args))
    if index < len(args) and args[index] == "--":
        index += 1
    return [*args[:index], value, *args[index:]]
