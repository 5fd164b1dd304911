# A stand-in for systemd's notification socket: prints each datagram on one line and closes the
# file descriptors systemd-notify passes for its barrier, as systemd does.
import array
import os
import socket
import sys

sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
sock.bind(sys.argv[1])
print("listening", flush=True)
while True:
    data, ancillary, _, _ = sock.recvmsg(4096, socket.CMSG_SPACE(16 * 4))
    for _, kind, payload in ancillary:
        if kind == socket.SCM_RIGHTS:
            fds = array.array("i")
            fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
            for fd in fds:
                os.close(fd)
    print(data.decode().replace("\n", " "), flush=True)
