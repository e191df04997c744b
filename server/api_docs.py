"""The API's documentation pages, ``/api/docs`` (Swagger UI) and ``/api/redoc`` (ReDoc),
with every asset served from here: the pages work offline and under a ``script-src 'self'``
policy (no CDN, no inline script).

Swagger UI's and ReDoc's bundles come from the ``fastapi-offline`` package (pinned in
``pyproject.toml``), served at ``/docs-assets/NAME`` outside ``/api`` (public library
code: a page opened with ``?token=`` loads them without the cookie). Swagger UI starts from
``swagger-init.js`` (below), which reads the OpenAPI URL from its element's
``data-openapi-url``; ReDoc starts from its ``<redoc spec-url>`` element by itself. ReDoc's
side menu shows a logo that its bundle fetches from Redocly's CDN (hidden when that fails):
the bundle is served with that URL pointed at the favicon here, so the page makes no
request elsewhere.
"""

from __future__ import annotations

import functools
from pathlib import Path

import fastapi_offline
from fastapi import FastAPI
from fastapi.responses import FileResponse, HTMLResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

ASSETS_URL = "/docs-assets"
_PACKAGE_ASSETS = Path(fastapi_offline.__file__).resolve().parent / "static"
_ASSETS = {
    "swagger-ui-bundle.js": "text/javascript",
    "swagger-ui.css": "text/css",
    "redoc.standalone.js": "text/javascript",
    "favicon.png": "image/png",
}
_SWAGGER_INIT = """window.ui = SwaggerUIBundle({
  url: document.getElementById("swagger-ui").dataset.openapiUrl,
  dom_id: "#swagger-ui",
  layout: "BaseLayout",
  deepLinking: true,
  showExtensions: true,
  showCommonExtensions: true,
  presets: [SwaggerUIBundle.presets.apis, SwaggerUIBundle.SwaggerUIStandalonePreset],
});
"""
_CACHE = {"Cache-Control": "public, max-age=86400"}
_REDOC_LOGO = b"https://cdn.redoc.ly/redoc/logo-mini.svg"


@functools.cache
def _redoc_bundle() -> bytes:
    bundle = (_PACKAGE_ASSETS / "redoc.standalone.js").read_bytes()
    return bundle.replace(_REDOC_LOGO, f"{ASSETS_URL}/favicon.png".encode())


def add_docs(app: FastAPI, openapi_url: str) -> None:
    """Adds ``/api/docs``, ``/api/redoc`` and their assets (create the app with
    ``docs_url=None, redoc_url=None``)."""
    title = f"{app.title} API"

    @app.get("/api/docs", include_in_schema=False)
    async def swagger_ui() -> HTMLResponse:
        return HTMLResponse(
            f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<link rel="icon" href="{ASSETS_URL}/favicon.png">
<link rel="stylesheet" href="{ASSETS_URL}/swagger-ui.css"></head>
<body><div id="swagger-ui" data-openapi-url="{openapi_url}"></div>
<script src="{ASSETS_URL}/swagger-ui-bundle.js"></script>
<script src="{ASSETS_URL}/swagger-init.js"></script></body></html>
"""
        )

    @app.get("/api/redoc", include_in_schema=False)
    async def redoc() -> HTMLResponse:
        return HTMLResponse(
            f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<link rel="icon" href="{ASSETS_URL}/favicon.png"></head>
<body><redoc spec-url="{openapi_url}"></redoc>
<script src="{ASSETS_URL}/redoc.standalone.js"></script></body></html>
"""
        )

    @app.get(f"{ASSETS_URL}/{{name}}", include_in_schema=False)
    async def asset(name: str) -> Response:
        if name == "swagger-init.js":
            return Response(_SWAGGER_INIT, media_type="text/javascript", headers=_CACHE)
        if name == "redoc.standalone.js":
            return Response(_redoc_bundle(), media_type="text/javascript", headers=_CACHE)
        media_type = _ASSETS.get(name)
        if media_type is None:
            raise StarletteHTTPException(404, "Not Found")
        return FileResponse(_PACKAGE_ASSETS / name, media_type=media_type, headers=_CACHE)
