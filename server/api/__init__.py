"""The HTTP and websocket API: one router per resource."""
