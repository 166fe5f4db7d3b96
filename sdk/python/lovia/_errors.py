"""The exceptions a tool raises, and the one raised for a bad declaration.

Each call-ending exception maps onto one case of the contract's
`call-error` (docs/semantics.md §5); the mapping itself lives in
`lovia._plugin`, the only module that knows the contract.
"""

from __future__ import annotations


class ToolError(Exception):
    """An ordinary tool failure. The model reads `Tool error: <message>`,
    plus `\\n  hint: <hint>` when a hint is given. Retried per the tool's
    `retries=`."""

    def __init__(self, message: str = "", *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = str(message)
        self.hint = None if hint is None else str(hint)

    def __str__(self) -> str:
        # The host's rendering (docs/semantics.md §5), so logs read like the model's view.
        if self.hint is None:
            return self.message
        if not self.message:
            return self.hint
        return f"{self.message}\n  hint: {self.hint}"


class InvalidToolArguments(ToolError):
    """A semantic check of the arguments failed inside the tool. Never retried."""


class RunCancelled(Exception):
    """Ends the whole run; the call leaves no result (docs/semantics.md §6)."""

    def __init__(self, reason: str = "") -> None:
        super().__init__(reason)
        self.reason = str(reason) or "run cancelled"

    def __str__(self) -> str:
        return self.reason


class BudgetExceeded(Exception):
    """A budget the tool manages (a sub-run's) was exceeded: an ordinary
    error result for the model, never retried (docs/semantics.md §7)."""

    def __str__(self) -> str:
        return super().__str__() or type(self).__name__


class DeclarationError(TypeError):
    """A `@tool` declaration that cannot become a tool: raised when the
    decorator runs, which `lovia build` does before building anything.
    The message names the function and, when it is about one, the parameter."""

    def __init__(self, function: str, message: str, parameter: str | None = None) -> None:
        where = f"tool function '{function}'"
        if parameter is not None:
            where += f", parameter '{parameter}'"
        super().__init__(f"{where}: {message}")
        self.function = function
        self.parameter = parameter
