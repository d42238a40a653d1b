"""One exception for every client-visible failure, carrying vLLM's error shape."""

from __future__ import annotations

from .contract.error_shape import error_body


class DerenderError(Exception):
    """A request the service refuses: `status` is the HTTP status to answer."""

    def __init__(self, message: str, status: int = 400, param: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.param = param

    def body(self) -> bytes:
        return error_body(self.status, self.message, self.param)


def bad_request(message: str, param: str | None = None) -> DerenderError:
    return DerenderError(message, 400, param)
