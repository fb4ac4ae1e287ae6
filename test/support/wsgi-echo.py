# A WSGI application behind the ingress tests, on Python's stdlib server (wsgiref.simple_server): it
# answers every request with the HTTP_* variables of its environ as JSON, which is what a WSGI app
# (PEP 3333, CGI rules: `-` becomes `_`, names upper-cased) reads a request's headers from. Listens
# on a port of 127.0.0.1 the OS picks and prints that port as its first line of stdout.
import json
import sys
from wsgiref.simple_server import WSGIRequestHandler, make_server


def app(environ, start_response):
    length = int(environ.get("CONTENT_LENGTH") or 0)
    if length:
        environ["wsgi.input"].read(length)
    body = json.dumps({k: v for k, v in environ.items() if k.startswith("HTTP_")}).encode("utf-8")
    start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
    return [body]


class QuietHandler(WSGIRequestHandler):
    def log_message(self, format, *args):
        pass


server = make_server("127.0.0.1", 0, app, handler_class=QuietHandler)
print(server.server_port, flush=True)
server.serve_forever()
