"""Who may ask the server what: the checks every request passes before its route, and the headers of every answer.

A request is refused, with a JSON error, when

* its ``Host`` names neither the address the server is bound to (an IP literal; ``localhost`` on loopback) nor
  a name of ``--allow_host`` (421: a DNS-rebinding page reaches 127.0.0.1 under a name of its own);
* it comes with an ``Origin`` that is not the server's own (``http://`` + its ``Host``) nor one of
  ``--allow_origin`` (403: another site's page, which the browser lets POST without asking);
* it asks the API (``/v1/...``) or ``/metrics`` without ``Authorization: Bearer <--token>``, when the server has a
  token (401);
* it POSTs to the API a body whose ``Content-Type`` is not ``application/json`` (415: a cross-site form or a
  ``text/plain`` fetch is sent without a CORS preflight; JSON is not);
* its path holds a NUL (404: no file has one).

>>> access = Access.bind('127.0.0.1')
>>> access.refusal('POST', '/v1/analyse', [(b'host', b'127.0.0.1:8000'), (b'content-type', b'application/json')])
>>> access.refusal('POST', '/v1/analyse', [(b'host', b'evil.example:8000')])
(421, "host: 'evil.example' is not this server's name (127.0.0.1, localhost; more with --allow_host)")
>>> access.refusal('GET', '/v1/info', [(b'host', b'localhost:8000'), (b'origin', b'https://evil.example')])
(403, "origin: 'https://evil.example' is not this server's page (more with --allow_origin)")
"""

import dataclasses
import hmac
import ipaddress

API_PREFIX = '/v1/'
JSON = 'application/json'
# Of every answer: the page loads its own files only (its inline styles aside: the board widget sets them), in no
# frame of another site; nothing is sniffed, cached (the API's answers) or sent as a referrer.
CSP = (
  "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
  "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
HEADERS = [
  (b'x-content-type-options', b'nosniff'),
  (b'x-frame-options', b'DENY'),
  (b'content-security-policy', CSP.encode()),
  (b'referrer-policy', b'no-referrer'),
  (b'cross-origin-resource-policy', b'same-origin'),
]
NO_STORE = (b'cache-control', b'no-store')  # The API's answers, health and metrics.
REVALIDATE = (b'cache-control', b'no-cache')  # The page and its files: asked again each time (they are small).
LOOPBACK_NAMES = ('localhost',)


def _hostname(host: str) -> str:
  """The name of a ``Host`` header, without its port and an IPv6 literal's brackets, lower-case.

  >>> _hostname('[::1]:8000'), _hostname('LocalHost:80'), _hostname('10.0.0.1')
  ('::1', 'localhost', '10.0.0.1')
  """
  host = host.strip().lower()
  if host.startswith('['):
    return host[1 : host.find(']')] if ']' in host else host
  return host.rsplit(':', 1)[0] if host.count(':') == 1 else host


def _ip(name: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
  try:
    return ipaddress.ip_address(name)
  except ValueError:
    return None


@dataclasses.dataclass(frozen=True)
class Access:
  """What the server accepts: `hosts` (``Host`` names; ``*`` any), `any_ip` (any IP literal as the ``Host``: a
  server bound to every interface), `origins` (others than its own; ``*`` any) and `token` (None: no token)."""

  hosts: frozenset[str]
  any_ip: bool = False
  origins: frozenset[str] = frozenset()
  token: str | None = None

  @classmethod
  def bind(
    cls, host: str, *, allow_hosts: tuple[str, ...] = (), allow_origins: tuple[str, ...] = (), token: str | None = None
  ) -> 'Access':
    """The access of a server bound to `host` (an address or a name, as ``--host``)."""
    address = _ip(host)
    wildcard = address is not None and address.is_unspecified
    loopback = host in LOOPBACK_NAMES or (address is not None and address.is_loopback)
    names = {_hostname(host), *(LOOPBACK_NAMES if loopback else ()), *(h.lower() for h in allow_hosts)}
    origins = frozenset(o.rstrip('/').lower() for o in allow_origins)
    return cls(frozenset(names), any_ip=wildcard, origins=origins, token=token)

  def refusal(self, method: str, path: str, headers: list[tuple[bytes, bytes]]) -> tuple[int, str] | None:
    """(status, error) of a request that is refused, or None."""
    if '\x00' in path:
      return 404, f'{method} {path.replace(chr(0), "%00")[:200]}: Not Found'
    host = origin = authorization = kind = None
    for key, value in headers:
      if key == b'host':
        host = value.decode('latin-1')
      elif key == b'origin':
        origin = value.decode('latin-1')
      elif key == b'authorization':
        authorization = value.decode('latin-1')
      elif key == b'content-type':
        kind = value.decode('latin-1')
    name = _hostname(host or '')
    if '*' not in self.hosts and name not in self.hosts and not (self.any_ip and _ip(name) is not None):
      allowed = ', '.join(sorted(self.hosts)) + (', any IP address' if self.any_ip else '')
      return 421, f"host: {name[:100]!r} is not this server's name ({allowed}; more with --allow_host)"
    if origin is not None:
      own = origin.rstrip('/').lower()
      if own != f'http://{(host or "").lower()}' and own not in self.origins and '*' not in self.origins:
        return 403, f"origin: {origin[:100]!r} is not this server's page (more with --allow_origin)"
    api = path.startswith(API_PREFIX)
    if self.token is not None and (api or path == '/metrics'):
      expected = f'Bearer {self.token}'.encode()
      if authorization is None or not hmac.compare_digest(authorization.encode('latin-1'), expected):
        return 401, 'authorization: this server needs "Authorization: Bearer <its --token>"'
    if api and method == 'POST' and (kind or '').split(';', 1)[0].strip().lower() != JSON:
      return 415, f'content-type: expected {JSON}, got {(kind or "none")[:60]!r}'
    return None

  def headers(self, path: str) -> list[tuple[bytes, bytes]]:
    """The headers every answer to `path` gets."""
    page = path == '/' or path.startswith('/page/')
    return [*HEADERS, REVALIDATE if page else NO_STORE]
