#!/usr/bin/env python3
"""A stand-in for the vendors' HTTP APIs, for scripts/demo.sh: answers every POST with
200 and a Mindbox-style success body, and appends each request it received to a log, one JSON
object a line: {"requestLine", "headers", "body"}. The demo prints the NCPushOpen request from
it, so a newcomer sees exactly what pushspool's outbox sends to Mindbox.

usage: demo-vendor.py PORT_FILE LOG_FILE
Listens on 127.0.0.1, a free port, written to PORT_FILE (renamed into place once listening,
so a reader never sees half a number). SIGTERM stops it with status 0.
"""
import http.server
import json
import os
import signal
import sys

# A vendor would refuse anything this large; the outbox's bodies are well under a kilobyte.
MAX_BODY = 1 << 20


class Handler(http.server.BaseHTTPRequestHandler):
    # HTTP/1.1 so libcurl's keep-alive and `Expect: 100-continue` work as against a vendor.
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        try:
            length = int(self.headers.get("Content-Length", "0"))
        except ValueError:
            length = -1
        if length < 0 or length > MAX_BODY:
            self.answer(413, b'{"status":"ValidationError"}')
            return
        body = self.rfile.read(length)
        entry = {
            "requestLine": self.requestline,
            "headers": [[name, value] for name, value in self.headers.items()],
            "body": body.decode("utf-8", errors="replace"),
        }
        with open(self.server.log_path, "a", encoding="utf-8") as log:
            log.write(json.dumps(entry, ensure_ascii=False) + "\n")
            log.flush()
            os.fsync(log.fileno())
        self.answer(200, b'{"status":"Success"}')

    def answer(self, status, body):
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format, *args):
        # One line a request on stderr (the demo sends it to vendor.log).
        sys.stderr.write("%s %s\n" % (self.log_date_time_string(), format % args))


def main():
    if len(sys.argv) != 3:
        sys.stderr.write(__doc__)
        return 64
    port_file, log_path = sys.argv[1], sys.argv[2]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.log_path = log_path
    open(log_path, "a").close()
    with open(port_file + ".tmp", "w") as f:
        f.write("%d\n" % server.server_address[1])
    os.rename(port_file + ".tmp", port_file)
    # serve_forever runs on the main thread, where Python delivers signals: SystemExit
    # unwinds it, and the with-block closes the listening socket. The signal mask is
    # inherited across exec: a launcher that blocks SIGTERM (a test runner waiting for signals
    # on a thread of its own) would leave the handler unreachable, so unblock it.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(0))
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGTERM])
    with server:
        server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
