"""ggml-rpc's handshake refuses a peer whose op numbers differ (vendor patch 0039): this build's enum
ggml_op has the ops of patches 0022 / 0023 / 0025, so its RPC protocol version is 135.0.x (0x80 | 7),
not stock ggml 0.25.3's 7.0.0, and a stock server must not be accepted (it would run NORM as RMS_NORM).

The server here is a stand-in that answers the RPC protocol's first two commands byte for byte as
ggml-rpc.cpp's server does (HELLO: | size u64 | major, minor, patch, pad u8 | 24 bytes of transport
caps |; DEVICE_COUNT: | size u64 | count u32 |), with the version a test gives it. The client is
ggml_backend_rpc_add_server, in a child process: a refused handshake is a GGML_ABORT."""
from __future__ import annotations

import socket
import struct
import subprocess
import sys
import threading

from support import child_env

RPC_CMD_HELLO, RPC_CMD_DEVICE_COUNT = 14, 15
CAPS_SIZE = 24  # RPC_CONN_CAPS_SIZE in ggml-rpc/transport.h
STOCK_0_25_3 = (7, 0, 0)
THIS_BUILD = (0x80 | 7, 0, 3)

CLIENT = """
import sys
from pyggml_opt._lib import ffi, lib
reg = lib.ggml_backend_reg_by_name(b"RPC")
add_server = ffi.cast("ggml_backend_reg_t (*)(const char *)",
                      lib.ggml_backend_reg_get_proc_address(reg, b"ggml_backend_rpc_add_server"))
server = add_server(sys.argv[1].encode())
print("devices", lib.ggml_backend_reg_dev_count(server), flush=True)
"""


def _recv(conn: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            raise ConnectionError("client closed the connection")
        data += chunk
    return data


def _serve(listener: socket.socket, version: tuple[int, int, int], seen: list[int]) -> None:
    """One client: the HELLO answer with ``version``, then one device; every command is recorded."""
    conn, _ = listener.accept()
    with conn:
        try:
            while True:
                cmd = _recv(conn, 1)[0]
                (size,) = struct.unpack("<Q", _recv(conn, 8))
                _recv(conn, size)
                seen.append(cmd)
                if cmd == RPC_CMD_HELLO:
                    body = bytes([*version, 0]) + bytes(CAPS_SIZE)
                elif cmd == RPC_CMD_DEVICE_COUNT:
                    body = struct.pack("<I", 1)
                else:
                    return
                conn.sendall(struct.pack("<Q", len(body)) + body)
        except ConnectionError:
            return


def _connect(version: tuple[int, int, int]) -> tuple[subprocess.CompletedProcess, list[int]]:
    """Run the client against a stand-in server answering ``version``: its result and the commands sent."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        seen: list[int] = []
        server = threading.Thread(target=_serve, args=(listener, version, seen), daemon=True)
        server.start()
        endpoint = f"127.0.0.1:{listener.getsockname()[1]}"
        child = subprocess.run([sys.executable, "-c", CLIENT, endpoint], capture_output=True, text=True,
                               timeout=60, env=child_env())
        server.join(timeout=10)
    return child, seen


def test_a_stock_server_is_refused():
    child, seen = _connect(STOCK_0_25_3)
    assert child.returncode != 0, child.stdout
    assert "RPC server version mismatch: 7.0.0" in child.stderr, child.stderr
    assert "devices" not in child.stdout
    assert seen == [RPC_CMD_HELLO]  # nothing after the handshake: no graph reaches a stock server


def test_a_server_of_this_protocol_is_accepted():
    child, seen = _connect(THIS_BUILD)
    assert child.returncode == 0, child.stderr
    assert child.stdout.split() == ["devices", "1"]
    assert seen == [RPC_CMD_HELLO, RPC_CMD_DEVICE_COUNT]
