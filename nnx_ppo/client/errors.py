"""What can go wrong talking to the service: small exception classes with clean messages."""

from __future__ import annotations

from typing import Any


class ClientError(Exception):
    """Base of every error the client raises."""


class ServiceUnavailable(ClientError):
    """The service cannot be reached (not running, wrong URL, timed out)."""


class ApiError(ClientError):
    """The service answered with an error status.

    Attributes:
        status_code: The HTTP status (e.g. 422).
        detail: The server's ``detail``: a string, or for a 422 FastAPI's list of
            ``{"loc": [...], "msg": ..., "type": ...}`` field errors.
    """

    def __init__(self, status_code: int, detail: Any, what: str = ""):
        self.status_code = status_code
        self.detail = detail
        self.what = what
        super().__init__(self._message())

    @property
    def field_errors(self) -> list[tuple[str, str]]:
        """``(dotted field, message)`` for each field error of a 422 (``body.`` left out)."""
        if not isinstance(self.detail, list):
            return []
        out = []
        for item in self.detail:
            if not isinstance(item, dict):
                continue
            loc = [str(part) for part in item.get("loc", [])]
            if loc and loc[0] == "body":
                loc = loc[1:]
            out.append((".".join(loc) or "body", str(item.get("msg", ""))))
        return out

    def _message(self) -> str:
        prefix = f"{self.what}: " if self.what else ""
        if isinstance(self.detail, list):
            errors = "; ".join(f"{loc}: {msg}" for loc, msg in self.field_errors)
            return f"{prefix}{self.status_code} invalid: {errors}"
        return f"{prefix}{self.status_code} {self.detail}"


class NotFound(ApiError):
    """404: an unknown run, video or checkpoint."""


class Unauthorized(ApiError):
    """401: no token, or not the service's token."""

    def _message(self, how: str = "Client(token=...)") -> str:
        return (
            f"{super()._message()} (pass {how}, set NNX_PPO_API_TOKEN, or run where "
            "`nnx-ppo serve` keeps its data directory: it writes the token to "
            "<data dir>/api_token; NNX_PPO_DATA_DIR names that directory)"
        )

    def cli_message(self) -> str:
        """The message with the command line's way to give the token."""
        return self._message("--token TOKEN")


def api_error(status_code: int, detail: Any, what: str = "") -> ApiError:
    """The most specific ``ApiError`` for a status code."""
    cls = {404: NotFound, 401: Unauthorized}.get(status_code, ApiError)
    return cls(status_code, detail, what)
