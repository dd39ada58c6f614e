"""The webhook contract: a POST signed with HMAC-SHA256 of its body under the setting
`webhook_secret` is forwarded to the setting `upstream`, counted in table `hooks`, and
answered with the count and the upstream's answer."""

import hashlib
import hmac

from tally import config, http, state

TABLE = "hooks"


def handle(request: http.Request) -> http.Response:
    if request.method != "POST":
        return http.Response("method not allowed", 405)
    if not signed(request):
        return http.Response("bad signature", 401)
    upstream = config.get("upstream")
    if upstream is None:
        return http.Response("no upstream is set", 500)
    try:
        answer = http.fetch(
            upstream,
            method="POST",
            headers={"content-type": "application/octet-stream"},
            body=request.body,
        )
    except http.FetchError as error:
        return http.Response(str(error), 502)
    if not answer.ok:
        return http.Response(f"upstream answered {answer.status}", 502)
    reply = answer.text()
    count = (state.get_i64(TABLE, "count") or 0) + 1
    state.put_i64(TABLE, "count", count)
    state.put(TABLE, "last", answer.body)
    return http.Response(f"{count} {reply}", 201, {"content-type": "text/plain"})


def signed(request: http.Request) -> bool:
    """Whether `x-signature` is `sha256=<hex of HMAC-SHA256(secret, body)>`, compared
    in constant time."""
    secret = config.get("webhook_secret")
    signature = request.headers.get("x-signature")
    if secret is None or signature is None:
        return False
    expected = "sha256=" + hmac.new(secret.encode(), request.body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected.encode(), signature.encode("latin-1"))
