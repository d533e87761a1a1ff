"""A real python grpcio client (Debian's python3-grpcio) for the gateway's tests.

Usage: /usr/bin/python3 grpcio-client.py TARGET CA_FILE_OR_- AUTHORIZATION_OR_- METHOD TEXT
Calls METHOD (a full path, /test.Plain/Unary) with test.Msg { text: TEXT }, over TLS trusting CA_FILE
(or h2c when -), and prints one JSON line: the answer's text, or the status code name, details and
trailing metadata.
"""
import json
import sys

import grpc


def encode(text):
    data = text.encode()
    return bytes([0x0A, len(data)]) + data


def decode(data):
    return data[2:2 + data[1]].decode() if len(data) > 2 else ""


def main():
    target, ca, authorization, method, text = sys.argv[1:6]
    if ca == "-":
        channel = grpc.insecure_channel(target)
    else:
        with open(ca, "rb") as f:
            channel = grpc.secure_channel(target, grpc.ssl_channel_credentials(f.read()))
    call = channel.unary_unary(method, request_serializer=lambda b: b, response_deserializer=lambda b: b)
    metadata = [] if authorization == "-" else [("authorization", authorization)]
    try:
        answer = call(encode(text), metadata=metadata, timeout=10)
        print(json.dumps({"text": decode(answer)}))
    except grpc.RpcError as err:
        trailing = {k: (v.hex() if isinstance(v, bytes) else v) for k, v in (err.trailing_metadata() or [])}
        print(json.dumps({"code": err.code().name, "details": err.details(), "trailing": trailing}))


main()
