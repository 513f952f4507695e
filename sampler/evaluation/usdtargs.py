"""A USDT probe's arguments as names: ``arg0``..``argN`` at a USDT site mean what its note says
(``-4@%edi``: the low 32 bits of rdi, signed), not the ABI's argument registers. Each expression
that names one is rewritten once, before the first hit, with the argument's own expression
(usdt.py), so every reader (the int3's, the in-process probe's plan) reads it as any other."""

from __future__ import annotations

import re

from sampler.debuginfo import usdt
from sampler.debuginfo.locate import Place
from sampler.errors import ExpressionError
from sampler.evaluation.fields import free_names, rewrite
from sampler.language import expr
from sampler.language.expr import Expression

_ARGUMENT = re.compile(r"^arg(\d+)$")


def substitute(expressions: tuple[Expression, ...], place: Place) -> tuple[Expression, ...]:
    """The expressions with each argN of the place's USDT probe replaced by where the probe has it."""
    probe, module = place.usdt, place.module
    if probe is None or module is None:
        return expressions
    result = []
    for expression in expressions:
        used = [name for name in free_names(expression) if _ARGUMENT.match(name)]
        if not used:
            result.append(expression)
            continue
        chosen = {}
        for name in used:
            index = int(name[3:])
            if index >= len(probe.arguments):
                raise ExpressionError(f"{expression.text}: the USDT probe {probe.full_name} has "
                                      f"{_count(len(probe.arguments))} ({probe.spec or 'none'}), no {name}",
                                      "sampler list --pid PID 'usdt:*' shows each probe's arguments")
            argument = probe.arguments[index]
            addresses = {}
            for symbol in usdt.symbols_named(argument):
                found = module.symbol(symbol)
                if found is not None:
                    addresses[symbol] = found.address + module.bias
            try:
                chosen[name] = usdt.resolved(argument, addresses)
            except usdt.BadSpec as e:
                raise ExpressionError(f"{expression.text}: {probe.full_name}'s {name} cannot be read ({e})",
                                      "leave that argument out") from None
        text = rewrite(expression.text, chosen)
        result.append(Expression(expression.name, text, expr.parse(text)))
    return tuple(result)


def _count(n: int) -> str:
    return "no arguments" if n == 0 else f"{n} argument{'s' if n > 1 else ''} (arg0-arg{n - 1})" if n > 1 \
        else "1 argument (arg0)"
