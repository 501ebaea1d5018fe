#!/usr/bin/env python3
"""The API server's way to the pod network: an HTTP CONNECT proxy on a unix socket.

kube-apiserver runs in this machine's root namespace, which has no address on the pod network (the lab's
rule), yet it must reach pods and Services for its pod/service proxy (`kubectl proxy`, the e2e suite's way of
reading a pod's files) and the VM node's kubelet. Its EgressSelectorConfiguration sends that `cluster`
traffic here; this proxy dials each target from the namespace that can reach it: addresses in --via (the
pod and service networks) from --netns (kuryr-kapi, the API server's own Neutron port, as a control-plane
VM would), everything else (the kubelet nodes on localhost) from the root namespace.

Usage: kapi-egress.py --listen SOCK --netns NAME --via CIDR[,CIDR...]
"""
import argparse
import ctypes
import ipaddress
import os
import queue
import socket
import sys
import threading
import time

CLONE_NEWNET = 0x40000000
MAX_HEADER = 8192
CONNECT_TIMEOUT = 10.0


def log(msg):
    print(f"{time.strftime('%H:%M:%S')} {msg}", flush=True)


class NetnsSockets:
    """Makes sockets inside a network namespace: a socket belongs to the namespace of the thread that
    created it, so one thread moves into NAME (setns is per thread) and creates them on request."""

    def __init__(self, name):
        self.requests = queue.Queue()
        fd = os.open(f"/run/netns/{name}", os.O_RDONLY)
        ready = queue.Queue()
        threading.Thread(target=self._run, args=(fd, ready), daemon=True).start()
        err = ready.get()
        if err:
            raise OSError(err)

    def _run(self, fd, ready):
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.setns(fd, CLONE_NEWNET) != 0:
            ready.put(f"setns: {os.strerror(ctypes.get_errno())}")
            return
        os.close(fd)
        ready.put(None)
        while True:
            family, reply = self.requests.get()
            try:
                reply.put(socket.socket(family, socket.SOCK_STREAM))
            except OSError as e:
                reply.put(e)

    def socket(self, family):
        reply = queue.Queue()
        self.requests.put((family, reply))
        s = reply.get()
        if isinstance(s, Exception):
            raise s
        return s


def read_request(conn):
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(4096)
        if not chunk:
            raise ValueError("closed before the request ended")
        data += chunk
        if len(data) > MAX_HEADER:
            raise ValueError("request header too long")
    head, rest = data.split(b"\r\n\r\n", 1)
    line = head.split(b"\r\n", 1)[0].decode("latin-1")
    parts = line.split()
    if len(parts) != 3 or parts[0] != "CONNECT":
        raise ValueError(f"not a CONNECT request: {line!r}")
    host, _, port = parts[1].rpartition(":")
    return host.strip("[]"), int(port), rest


def pump(src, dst):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def resolve(host, port):
    if host == "localhost":
        host = "127.0.0.1"
    info = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    family, _, _, _, addr = info[0]
    return family, addr


def serve(conn, netns, via):
    target = "?"
    upstream = None
    try:
        host, port, rest = read_request(conn)
        target = f"{host}:{port}"
        family, addr = resolve(host, port)
        inside = any(ipaddress.ip_address(addr[0]) in net for net in via)
        upstream = netns.socket(family) if inside else socket.socket(family, socket.SOCK_STREAM)
        upstream.settimeout(CONNECT_TIMEOUT)
        upstream.connect(addr)
        upstream.settimeout(None)
        conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        if rest:
            upstream.sendall(rest)
    except (OSError, ValueError) as e:
        log(f"{target}: {e}")
        try:
            conn.sendall(f"HTTP/1.1 503 Service Unavailable\r\n\r\n{e}\n".encode())
        except OSError:
            pass
        conn.close()
        if upstream:
            upstream.close()
        return
    back = threading.Thread(target=pump, args=(upstream, conn), daemon=True)
    back.start()
    pump(conn, upstream)
    back.join()
    conn.close()
    upstream.close()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--listen", required=True)
    p.add_argument("--netns", required=True)
    p.add_argument("--via", required=True)
    a = p.parse_args()
    via = [ipaddress.ip_network(c) for c in a.via.split(",") if c]
    netns = NetnsSockets(a.netns)
    try:
        os.unlink(a.listen)
    except FileNotFoundError:
        pass
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(a.listen)
    os.chmod(a.listen, 0o600)
    srv.listen(128)
    log(f"listening on {a.listen}; {', '.join(map(str, via))} through netns {a.netns}, the rest from here")
    while True:
        conn, _ = srv.accept()
        threading.Thread(target=serve, args=(conn, netns, via), daemon=True).start()


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit(0)
