"""Serve an OpenStack WSGI application on 127.0.0.1 with a small threaded wsgiref server.

Neutron 29 and Keystone 30 ship no server binary of their own (they expect uwsgi/mod_wsgi); the lab needs
neither, so it imports the application and serves it here.

usage: wsgi_serve.py neutron|keystone PORT
Neutron reads NEUTRON_CONF_DIR (neutron.conf + ml2_conf.ini); Keystone reads OS_KEYSTONE_CONFIG_FILES.

At most WSGI_MAX_THREADS (24) requests are served at once; the rest wait in the listen backlog, as they would
for a uwsgi with a fixed number of workers. Unbounded, a burst of requests took every connection of Neutron's
database pool (5 + 50 overflow) while each thread still wanted one more: all of them waited forever inside
open transactions and Neutron answered nothing but 500 (QueuePool limit ... reached) until restarted.
"""
import os
import sys
import threading
from socketserver import ThreadingMixIn
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

what, port = sys.argv[1], int(sys.argv[2])
if what == "neutron":
    conf = os.environ["NEUTRON_CONF_DIR"]
    sys.argv = ["neutron-api", "--config-file", f"{conf}/neutron.conf", "--config-file", f"{conf}/ml2_conf.ini"]
    from neutron.wsgi.api import application  # noqa: E402
elif what == "keystone":
    sys.argv = ["keystone-api"]
    from keystone.server.wsgi import initialize_public_application  # noqa: E402

    application = initialize_public_application()
else:
    sys.exit(f"unknown application {what}")


MAX_THREADS = int(os.environ.get("WSGI_MAX_THREADS", "24"))


class ThreadedServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True
    request_queue_size = 512
    slots = threading.BoundedSemaphore(MAX_THREADS)

    def process_request(self, request, client_address):
        # Blocks the accept loop while every slot is busy: new connections queue in the backlog.
        self.slots.acquire()
        super().process_request(request, client_address)

    def process_request_thread(self, request, client_address):
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.slots.release()


class Handler(WSGIRequestHandler):
    def log_message(self, fmt, *args):
        sys.stderr.write("ACCESS %s\n" % (fmt % args))


srv = make_server("127.0.0.1", port, application, server_class=ThreadedServer, handler_class=Handler)
print(f"{what} listening on 127.0.0.1:{port}", flush=True)
srv.serve_forever()
