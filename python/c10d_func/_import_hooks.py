"""Runs code right after a module is imported, without importing it: c10d_func adapts torch's
compile stack (inductor's lowerings and passes) only in programs that load it, so `import
c10d_func` does not pay for importing inductor (about 1.5 s)."""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys
from collections.abc import Callable
from typing import Any

_pending: dict[str, list[Callable[[], None]]] = {}


class _RunAfterImport(importlib.abc.MetaPathFinder):
    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name not in _pending:
            return None
        actions = _pending.pop(name)
        if not _pending:
            sys.meta_path.remove(self)
        # The real spec, found by the finders after this one.
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def exec_then_run(module: Any) -> None:
            exec_module(module)
            for action in actions:
                action()

        spec.loader.exec_module = exec_then_run  # type: ignore[method-assign]
        return spec


_finder = _RunAfterImport()


def after_import(module: str, action: Callable[[], None]) -> None:
    """Runs `action` once `module` has been imported: now if it already is, else right after the
    module's own code has run."""
    if module in sys.modules:
        action()
        return
    _pending.setdefault(module, []).append(action)
    if _finder not in sys.meta_path:
        sys.meta_path.insert(0, _finder)
