"""Errors that become an HTTP status and the v2 protocol's {"error": message} body."""

from __future__ import annotations


class ServeError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def bad_request(message: str) -> ServeError:
    return ServeError(400, message)


def not_found(message: str) -> ServeError:
    return ServeError(404, message)


def unavailable(message: str) -> ServeError:
    return ServeError(503, message)
