"""Launch octavia-api, octavia-driver-agent or octavia-worker for the lab.

In-process adjustments, all about running outside a distribution's packaging:
1) ovn-octavia-provider builds octavia_lib's DriverLibrary() with the hard-coded sockets /var/run/octavia/*.sock,
   ignoring [driver_agent] *_socket_path: point those defaults at OCTAVIA_SOCK_DIR (the lab's state dir).
2) noauth only: keystoneauth's "none" plugin registers an option "endpoint" that collides with the deprecated
   [neutron] endpoint option Octavia registers (DuplicateOptError); drop it from the plugin.

3) worker only: the amphora provider runs with noop compute/amphora/network drivers (no Nova here), but the API
   allocated a real Neutron VIP port for it; let the noop network driver release that port on delete, through
   the real driver's deallocate_vip, so an amphora LB leaves nothing behind in Neutron.

4) api only: octavia-api serves with wsgiref's single-threaded simple_server, whose listen backlog is 5. While
   one slow request (an ovn-provider create) is served, a sixth waiting client's SYN is dropped and its
   connect times out (seen in CI: the conformance tests' version discovery). Give it uwsgi's kind of
   backlog: connections wait in the kernel's queue, served one by one as before.

usage: octavia_launch.py api|driver-agent|worker --config-file FILE
"""
import os
import sys

from octavia_lib.api.drivers import driver_lib

d = os.environ["OCTAVIA_SOCK_DIR"]
driver_lib.DriverLibrary.__init__.__defaults__ = (f"{d}/status.sock", f"{d}/stats.sock", f"{d}/get.sock")
if os.environ.get("LAB_AUTH") == "noauth":
    from keystoneauth1.loading._plugins import noauth as _ks_noauth

    _orig = _ks_noauth.NoAuth.get_options
    _ks_noauth.NoAuth.get_options = lambda self: [o for o in _orig(self) if o.name != "endpoint"]

what = sys.argv.pop(1)
if what == "api":
    from wsgiref import simple_server

    from octavia.cmd.api import main

    simple_server.WSGIServer.request_queue_size = 512
elif what == "driver-agent":
    from octavia.cmd.driver_agent import main
elif what == "worker":
    import logging

    from octavia.cmd.octavia_worker import main
    from octavia.network.drivers.neutron import allowed_address_pairs
    from octavia.network.drivers.noop_driver import driver as noop

    _noop_deallocate = noop.NoopNetworkDriver.deallocate_vip

    def _deallocate_vip(self, vip):
        _noop_deallocate(self, vip)
        try:
            allowed_address_pairs.AllowedAddressPairsDriver().deallocate_vip(vip)
        except Exception:  # the lab must not wedge a delete on this
            logging.getLogger(__name__).exception("lab: releasing VIP port %s failed", vip.port_id)

    noop.NoopNetworkDriver.deallocate_vip = _deallocate_vip
else:
    sys.exit(f"unknown octavia service {what}")
sys.exit(main())
