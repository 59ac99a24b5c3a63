"""The HTTP front end (wire §14).

Modules: ``app`` (Starlette routes over the dispatcher), ``bodies`` (typed JSON request
bodies), ``shapes`` (JSON <-> ``core.wire`` values, sans-IO; also used by the SDK's HTTP
connection, so this package's import must stay light), ``jwt`` (access tokens), ``metrics``
(Prometheus), ``server`` (``start_http``: uvicorn in the server's event loop), ``console``
(the web console's static files under ``/ui``, from ``ui/``; ``http.web_ui``), ``bearer``
(the ``Authorization: Bearer`` credentials, also read by ``lurcher-mcp``).
"""
