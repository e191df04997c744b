"""Prints the API's OpenAPI document (``python -m server.openapi``), e.g. for the
dashboard's typed client. Builds the app without starting anything."""

from __future__ import annotations

import json
import sys

from server.app import create_app
from server.settings import Settings


def main() -> None:
    app = create_app(Settings(api_token="openapi-only-token"), with_worker=False)
    json.dump(app.openapi(), sys.stdout, indent=2, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
