"""The kit's one error type: a message naming the problem and a fix naming the remedy."""

from __future__ import annotations


class XpukitError(Exception):
    """An error the user can act on. Printed as one line; no traceback unless --debug."""

    exit_code = 1

    def __init__(self, message: str, fix: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.fix = fix

    def one_line(self) -> str:
        text = self.message.strip().splitlines()[0] if self.message.strip() else type(self).__name__
        return f"{text} (fix: {self.fix})" if self.fix else text

    def __str__(self) -> str:
        return f"{self.message} (fix: {self.fix})" if self.fix else self.message
