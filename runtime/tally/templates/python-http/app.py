"""{{name}}: a Tally HTTP function, served at /fn/{{name}}/..."""

from tally import http


def handle(request: http.Request) -> http.Response:
    """Says hello, with the request's method and path."""
    # State lives across requests, exactly once per request:
    #   from tally import state
    #   hits = (state.get_i64("hits", request.path) or 0) + 1
    #   state.put_i64("hits", request.path, hits)
    # Calls out go to the destinations allowed at deploy (--outbound URL):
    #   answer = http.fetch("https://api.example.com/v1/ping", method="POST", body=b"hi")
    #   answer.status, answer.text()
    return http.Response(
        f"hello from {{name}}: {request.method} {request.path}",
        headers={"content-type": "text/plain"},
    )
