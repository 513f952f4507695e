"""A small Python web service on 127.0.0.1 (the flame graph of a Python service under load): each
GET /work renders a page (render_rows: a loop of string formatting) and checksums its start
(checksum: a loop over characters), about as long as each other; it
serves requests from a pool of threads. Prints "ready pid=P port=N" once it listens."""
import hashlib
import http.server
import os
import socketserver


def render_rows(n):
    rows = []
    for i in range(n):
        rows.append(f"<tr><td>{i}</td><td>{i * i}</td><td>{hex(i)}</td></tr>")
    return "<table>" + "".join(rows) + "</table>"


def checksum(text):
    digest = 0
    for ch in text:
        digest = (digest * 31 + ord(ch)) & 0xFFFFFFFF
    return digest ^ int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        page = render_rows(1500)
        body = f"{checksum(page[:6000])}\n".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


server = Server(("127.0.0.1", 0), Handler)
print(f"ready pid={os.getpid()} port={server.server_address[1]}", flush=True)
server.serve_forever()
